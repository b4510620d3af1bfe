// Package wincmdline holds the Windows command-line rules. A Windows
// process receives one command line, not an argument vector; the program's
// C runtime splits it again. EscapeArg, JoinArgs, SplitCommandLine and Program follow
// the Microsoft C runtime rules (the ones CommandLineToArgvW and the UCRT
// use, and Go's syscall.EscapeArg produces):
//
//   - arguments are separated by spaces and tabs outside double quotes;
//   - 2n backslashes followed by a quote are n backslashes, and the quote
//     opens or closes a quoted section;
//   - 2n+1 backslashes followed by a quote are n backslashes and a literal
//     quote;
//   - backslashes not followed by a quote are literal.
package wincmdline
