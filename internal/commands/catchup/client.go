package catchup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/core/errs"
	coremaster "github.com/walctl/walctl/internal/core/master"
)

// MasterEndpointFile is where `walctl master run` publishes its API URL
// under the data dir; the clients read it when master.url is not set.
func MasterEndpointFile(dataDir string) string { return filepath.Join(dataDir, "master", "ENDPOINT") }

const clientExitHelp = `
EXIT STATUS
  0    answered (for submit: reserved, awaiting handover or already active; with
       --dry-run any decision)
  2    refused as invalid input (a bad name, a refused field) or a missing or wrong
       token (HTTP 400, 401, 413)
  3    unknown target, or (cancel) no active catch-up (HTTP 404)
  4    conflict: (cancel) progress advanced since it was observed; try again (409)
  5    the master (or its etcd) is unavailable
  10   submit: the master refused the admission (disabled, not owned, no or stale
       statistics, below threshold, cooling down, capacity exhausted)`

// NewCmdCatchup returns the `catchup` command group.
func NewCmdCatchup(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catchup <command>",
		Short: "Catch up a table's WAL backlog: the executor and the master API's clients",
		Long: `Catch-up moves a large WAL backlog of one table with a dedicated executor (a
Kubernetes Job, or a child process of the master on the embedded default). The
master admits it (from its backlog scan or 'catchup submit'); 'catchup run' is
what the Job runs. submit, status and cancel talk to the master API at --master
(master.url; default: the master serving this data dir) with the bearer token
from WALCTL_MASTER_TOKEN or master.token.`,
	}
	cmd.AddCommand(NewCmdRun(f, nil), NewCmdSubmit(f, nil), NewCmdStatus(f, nil), NewCmdCancel(f, nil))
	return cmd
}

// client talks to the master API.
type client struct {
	base  string
	token string
	http  *http.Client
}

func newClient(f *cmdutil.Factory) (*client, error) {
	base := strings.TrimRight(f.Config.String(KeyMasterURL), "/")
	if base == "" {
		b, err := os.ReadFile(MasterEndpointFile(f.Config.Global.DataDir))
		if err != nil {
			return nil, fmt.Errorf("no master: give --master URL (or master.url), or run 'walctl master run' on data dir %s: %w",
				f.Config.Global.DataDir, errs.ErrUnavailable)
		}
		base = strings.TrimSpace(string(b))
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, cmdutil.FlagErrorf("--master %q: want http(s)://host:port", base)
	}
	return &client{base: base, token: f.Config.String(KeyMasterToken), http: &http.Client{Timeout: f.Timeout()}}, nil
}

// do sends one request and decodes a 200 answer into out; any other status
// becomes an error of the matching category carrying the API's message.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return cmdutil.FlagErrorWrap(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("master %s: %v: %w", c.base, err, errs.ErrUnavailable)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("master %s: read answer: %v: %w", c.base, err, errs.ErrUnavailable)
	}
	if resp.StatusCode == http.StatusOK {
		return json.Unmarshal(data, out)
	}
	var eb coremaster.ErrorBody
	msg := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		msg = eb.Error
	}
	return &apiError{msg: fmt.Sprintf("master %s: HTTP %d: %s", c.base, resp.StatusCode, msg), cat: category(resp.StatusCode)}
}

// apiError is a refusal by the API: its message already names the cause,
// its category (Unwrap) decides the exit code.
type apiError struct {
	msg string
	cat error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.cat }

// category maps an API status onto walctl's error categories (exit codes).
func category(status int) error {
	switch {
	case status == http.StatusBadRequest, status == http.StatusUnauthorized, status == http.StatusForbidden,
		status == http.StatusRequestEntityTooLarge, status == http.StatusMethodNotAllowed:
		return errs.ErrInvalid
	case status == http.StatusNotFound:
		return errs.ErrNotFound
	case status == http.StatusConflict:
		return errs.ErrConflict
	case status == http.StatusInternalServerError:
		return errs.ErrCorrupt
	}
	return errs.ErrUnavailable
}
