package proc

import "strings"

// crashMarks begin the lines the Go runtime writes when a program dies of
// a bug (an unrecovered panic, a fatal error such as a concurrent map
// write) or the race detector reports one. walctl's own log lines begin
// with their time, so a message that merely mentions a panic does not
// match.
var crashMarks = []string{"panic: ", "fatal error: ", "WARNING: DATA RACE"}

// Crash returns the first line of stderr that shows a crash of the Go
// runtime (see crashMarks), or "" if there is none. A fault harness fails a
// run on it whatever the exit status: a process killed on purpose may have
// crashed before.
func Crash(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		for _, m := range crashMarks {
			if strings.HasPrefix(line, m) {
				return line
			}
		}
	}
	return ""
}
