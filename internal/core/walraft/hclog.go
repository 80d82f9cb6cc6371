package walraft

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogWriter carries hashicorp/raft's hclog lines into the node's slog
// logger, at the level hclog printed.
type slogWriter struct{ l *slog.Logger }

// Write logs one hclog line.
func (w slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	lvl := slog.LevelInfo
	switch {
	case bytes.HasPrefix(line, []byte("[ERROR]")):
		lvl = slog.LevelError
	case bytes.HasPrefix(line, []byte("[WARN]")):
		lvl = slog.LevelWarn
	case bytes.HasPrefix(line, []byte("[DEBUG]")), bytes.HasPrefix(line, []byte("[TRACE]")):
		lvl = slog.LevelDebug
	}
	w.l.Log(context.Background(), lvl, string(line), "component", "raft")
	return len(p), nil
}

func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: slogWriter{l}, Level: hclog.Info, DisableTime: true})
}
