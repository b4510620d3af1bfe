package wincmdline

import "strings"

// EscapeArg quotes one argument so that the C runtime reads it back
// unchanged: an empty argument becomes "", an argument with a space or tab
// is enclosed in quotes, quotes are escaped with a backslash and the
// backslashes before a quote (or before the closing quote) are doubled.
// Anything else is returned as it is.
func EscapeArg(s string) string {
	if s == "" {
		return `""`
	}
	quote := strings.ContainsAny(s, " \t")
	if !quote && !strings.ContainsRune(s, '"') {
		// Backslashes only matter before a quote.
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	if quote {
		b.WriteByte('"')
	}
	backslashes := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			backslashes++
		case '"':
			// Double the run of backslashes, then escape the quote.
			b.WriteString(strings.Repeat(`\`, backslashes+1))
			backslashes = 0
		default:
			backslashes = 0
		}
		b.WriteByte(c)
	}
	if quote {
		// The closing quote must not be escaped by a trailing run.
		b.WriteString(strings.Repeat(`\`, backslashes))
		b.WriteByte('"')
	}
	return b.String()
}

// JoinArgs is the command line for args: each escaped with EscapeArg,
// joined by single spaces.
func JoinArgs(args []string) string {
	escaped := make([]string, len(args))
	for i, a := range args {
		escaped[i] = EscapeArg(a)
	}
	return strings.Join(escaped, " ")
}

// SplitCommandLine splits a command line into arguments as the UCRT does
// for a program's argv: the first argument (the program) ends at the first
// blank outside quotes and its quotes are dropped, with backslashes taken
// literally; the others follow the rules above, and "" inside a quoted
// section is a literal quote. Leading blanks are skipped. It is the inverse
// of JoinArgs for any args whose first element, a program path, has no
// quote and does not end in a backslash.
func SplitCommandLine(cmdline string) []string {
	s := strings.TrimLeft(cmdline, " \t")
	if s == "" {
		return nil
	}
	var args []string

	// The program name.
	var b strings.Builder
	inQuotes := false
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			inQuotes = !inQuotes
			continue
		}
		if !inQuotes && (c == ' ' || c == '\t') {
			break
		}
		b.WriteByte(c)
	}
	args = append(args, b.String())

	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return args
		}
		b.Reset()
		inQuotes = false
		for i < len(s) {
			backslashes := 0
			for i < len(s) && s[i] == '\\' {
				backslashes++
				i++
			}
			if i < len(s) && s[i] == '"' {
				b.WriteString(strings.Repeat(`\`, backslashes/2))
				switch {
				case backslashes%2 == 1:
					b.WriteByte('"')
				case inQuotes && i+1 < len(s) && s[i+1] == '"':
					b.WriteByte('"')
					i++
				default:
					inQuotes = !inQuotes
				}
				i++
				continue
			}
			b.WriteString(strings.Repeat(`\`, backslashes))
			if i == len(s) || (!inQuotes && (s[i] == ' ' || s[i] == '\t')) {
				break
			}
			b.WriteByte(s[i])
			i++
		}
		args = append(args, b.String())
	}
}

// Program is the program a command line runs: its first argument, as the
// C runtime splits it (quotes only group), or "" for an empty line.
func Program(cmdline string) string {
	if args := SplitCommandLine(cmdline); len(args) > 0 {
		return args[0]
	}
	return ""
}
