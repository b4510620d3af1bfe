package main

import "strings"

// split splits s at sep outside quotes, parentheses and braces.
func split(s string, sep byte) []string {
	var parts []string
	var quote byte
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '{':
			depth++
		case c == ')' || c == '}':
			depth--
		case c == sep && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// words splits a command into its arguments as PowerShell binds them:
// at blanks outside quotes; single quotes are literal, double quotes and
// bare words expand $env:NAME.
func (sh *shell) words(line string) []string {
	var args []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				end = len(line) - i - 1
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			end := strings.IndexByte(line[i+1:], '"')
			if end < 0 {
				end = len(line) - i - 1
			}
			cur.WriteString(sh.expand(line[i+1 : i+1+end]))
			i += end + 1
			inWord = true
		default:
			j := i
			for j < len(line) && !strings.ContainsRune(" \t'\"", rune(line[j])) {
				j++
			}
			cur.WriteString(sh.expand(line[i:j]))
			i = j - 1
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

// expand replaces each $env:NAME in s with the variable's value
// (case-insensitive, as Windows' environment is).
func (sh *shell) expand(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(strings.ToLower(s), "$env:")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		j := i + len("$env:")
		for j < len(s) && (s[j] == '_' || s[j] >= '0' && s[j] <= '9' || s[j]|0x20 >= 'a' && s[j]|0x20 <= 'z') {
			j++
		}
		b.WriteString(sh.getenv(s[i+len("$env:") : j]))
		s = s[j:]
	}
}
