// Package commands is walctl's command layer: the cobra tree, configuration
// through viper, rendering and exit codes. Each verb lives in its own package
// and file, parses and validates its options, and calls internal/core.
package commands

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/walctl/walctl/internal/commands/backlog"
	"github.com/walctl/walctl/internal/commands/bench"
	catchupcmd "github.com/walctl/walctl/internal/commands/catchup"
	"github.com/walctl/walctl/internal/commands/claim"
	"github.com/walctl/walctl/internal/commands/cmdutil"
	"github.com/walctl/walctl/internal/commands/completion"
	configcmd "github.com/walctl/walctl/internal/commands/config"
	"github.com/walctl/walctl/internal/commands/doctor"
	"github.com/walctl/walctl/internal/commands/epoch"
	"github.com/walctl/walctl/internal/commands/man"
	"github.com/walctl/walctl/internal/commands/master"
	"github.com/walctl/walctl/internal/commands/publish"
	"github.com/walctl/walctl/internal/commands/quickstart"
	"github.com/walctl/walctl/internal/commands/table"
	"github.com/walctl/walctl/internal/commands/verify"
	"github.com/walctl/walctl/internal/commands/version"
	"github.com/walctl/walctl/internal/commands/wal"
	"github.com/walctl/walctl/internal/commands/worker"
	"github.com/walctl/walctl/internal/core/failpoint"
)

// Main runs walctl with the process's arguments and streams and returns the
// exit code; cmd/walctl passes it to os.Exit.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, cmdutil.System(), os.Args[1:])
}

// Run executes one walctl invocation. SIGINT/SIGTERM cancel ctx; commands
// stop at their next cancellation point and the exit code is 130.
func Run(ctx context.Context, ios *cmdutil.IOStreams, args []string) int {
	f := cmdutil.NewFactory(ios)
	defer f.Close()
	root := NewRootCmd(f)
	root.SetArgs(args)
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)

	cmd, err := unknownSubcommand(root, args)
	if err == nil {
		cmd, err = root.ExecuteContextC(ctx)
	}
	if err == nil {
		return ExitOK
	}
	if strings.HasPrefix(err.Error(), "unknown command") {
		err = cmdutil.FlagErrorWrap(err)
	}
	code := ExitCode(err, ctx.Err() != nil)
	if _, silent := err.(*cmdutil.SilentError); silent {
		return code
	}
	if jsonOutput(f, args) {
		printJSONError(ios.ErrOut, code, err)
		return code
	}
	fmt.Fprintf(ios.ErrOut, "walctl: %s\n", err)
	if cmdutil.IsFlagError(err) {
		fmt.Fprintf(ios.ErrOut, "\n%s", cmd.UsageString())
	}
	return code
}

// NewRootCmd builds the command tree.
func NewRootCmd(f *cmdutil.Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "walctl <command>",
		Short: "Move records from a durable WAL into Lance tables, exactly once",
		Long: `walctl moves Arrow record batches from a durable write-ahead log into Lance tables
exactly once, while workers, catch-up Jobs and operators come and go. Ownership
lives in etcd, publisher epochs in the WAL fence every commit, and every command
obeys the same fencing rules as the daemons.

With no --etcd-endpoints, walctl runs on the embedded default: an in-process
etcd, the WAL and the tables under --data-dir. No set-up needed.`,
		Example: `  walctl quickstart                       # a demo on the embedded default
  walctl doctor                           # check etcd, the data dir and the WAL
  walctl --etcd-endpoints 10.0.0.5:2379 claim inspect --output json
  WALCTL_ETCD_ENDPOINTS=etcd:2379 walctl epoch show orders`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := cmdutil.LoadConfig(cmd)
			if err != nil {
				return err
			}
			f.Config = cfg
			f.Logger = newLogger(f.IOStreams, cfg.Global.LogLevel)
			// Fault injection for tests; off unless WALCTL_FAILPOINTS is set.
			if err := failpoint.FromEnv(); err != nil {
				return cmdutil.FlagErrorWrap(err)
			}
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.DisableAutoGenTag = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.FlagErrorWrap(err) })
	root.SetUsageTemplate(usageTemplate)
	root.SetHelpTemplate(helpTemplate)
	cmdutil.AddSettingFlags(root.PersistentFlags(),
		cmdutil.KeyConfig, cmdutil.KeyEtcdEndpoints, cmdutil.KeyEtcdPrefix, cmdutil.KeyEmbedded,
		cmdutil.KeyDataDir, cmdutil.KeyOutput, cmdutil.KeyLogLevel, cmdutil.KeyCommandTimeout,
		cmdutil.KeyWAL, cmdutil.KeyWALGroups, cmdutil.KeyLanceRoot)

	root.AddCommand(
		quickstart.NewCmdQuickstart(f, nil),
		version.NewCmdVersion(f, nil),
		configcmd.NewCmdConfig(f),
		doctor.NewCmdDoctor(f, nil),
		table.NewCmdTable(f),
		wal.NewCmdWAL(f),
		epoch.NewCmdEpoch(f),
		claim.NewCmdClaim(f),
		publish.NewCmdPrepare(f, nil),
		publish.NewCmdPublish(f, nil),
		verify.NewCmdVerify(f, nil),
		bench.NewCmdBench(f),
		worker.NewCmdWorker(f),
		master.NewCmdMaster(f),
		catchupcmd.NewCmdCatchup(f),
		backlog.NewCmdBacklog(f),
		completion.NewCmdCompletion(),
		man.NewCmdMan(),
	)
	return root
}

func newLogger(ios *cmdutil.IOStreams, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(ios.ErrOut, &slog.HandlerOptions{Level: l}))
}
