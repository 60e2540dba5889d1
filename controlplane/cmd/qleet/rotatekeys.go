package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/qleetos/terraform-provider-qleet/controlplane/server"
	"github.com/qleetos/terraform-provider-qleet/controlplane/store"
)

// rotateKeysConfig is what `qleet server rotate-keys` works on.
type rotateKeysConfig struct {
	// DataDir holds the default database and key file.
	DataDir string
	// DatabaseURL is the database (default: SQLite in DataDir).
	DatabaseURL string
	// KeyFile is the key ring (default <DataDir>/secret.key).
	KeyFile string
	// ResealOnly re-seals with the current first key instead of adding a new one.
	ResealOnly bool
	// Retire drops every key but the first from the file once every object is resealed.
	Retire bool
}

// rotateKeysCmd builds `qleet server rotate-keys`.
func (q *cli) rotateKeysCmd() *cobra.Command {
	var cfg rotateKeysConfig
	cmd := &cobra.Command{
		Use:   "rotate-keys",
		Short: "Add a new key that seals secrets at rest, and re-seal every stored secret with it",
		Long: `Add a new key that seals secrets at rest, and re-seal every stored secret with it.

The new key goes first in the key file (--secret-key-file, default <data-dir>/secret.key): it seals from
now on, and the older keys stay after it to open what they sealed. The key file is written before any
object, so a run that stops half-way loses nothing; run it again. Then every object whose write-only
fields are not sealed with the new key (plain text from before sealing, the old format, an older key) is
rewritten: its generation rises once and its controller reconciles it once, with the same values.
--retire then drops the older keys from the file.

Stop every API server first ('qleet server' or 'qleet api'): one still running holds the old keys and
cannot read what the new key sealed. Give every API replica the new key file before starting them again.

Every flag may also be given as a QLEET_<FLAG> environment variable.`,
		Example: "  qleet server rotate-keys --data-dir /var/lib/qleet --retire\n" +
			"  qleet server rotate-keys --database-url postgres://qleet@db/qleet --secret-key-file /etc/qleet/secret.key",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := q.flagsFromEnv(cmd); err != nil {
				return err
			}
			return rotateKeys(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&cfg.DataDir, "data-dir", ".qleet", "data directory (database, key file)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL URL (default: SQLite in the data dir)")
	fs.StringVar(&cfg.KeyFile, "secret-key-file", "", "the key file the API servers use (default: <data-dir>/secret.key)")
	fs.BoolVar(&cfg.ResealOnly, "reseal-only", false, "add no key: re-seal with the file's first key (e.g. after a run that failed for some objects)")
	fs.BoolVar(&cfg.Retire, "retire", false, "once every object is resealed, drop the older keys from the key file")
	_ = cmd.MarkFlagDirname("data-dir")
	return cmd
}

// rotateKeys adds a key to the ring (unless cfg.ResealOnly), re-seals every object with it and, with
// cfg.Retire and no failure, drops the other keys.
func rotateKeys(ctx context.Context, out io.Writer, cfg rotateKeysConfig) error {
	path := cfg.KeyFile
	if path == "" {
		path = filepath.Join(cfg.DataDir, "secret.key")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	keys, err := server.ParseSecretKeys(data)
	if err != nil {
		return fmt.Errorf("key file %s: %w", path, err)
	}
	url := cfg.DatabaseURL
	if url == "" {
		url = filepath.Join(cfg.DataDir, "qleet.db")
		if _, err := os.Stat(url); err != nil {
			return fmt.Errorf("database: %w", err)
		}
	}
	st, err := store.Open(ctx, store.Config{URL: url, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer func() { _ = st.Close() }()

	if !cfg.ResealOnly {
		key, err := server.NewSecretKey()
		if err != nil {
			return err
		}
		keys = append([][]byte{key}, keys...)
		// The file first: were the reseal to stop half-way, the rows it did are sealed with a key on disk.
		if err := writeKeyFile(path, keys); err != nil {
			return err
		}
		fmt.Fprintf(out, "added key %s to %s; it seals from now on\n", server.SecretKeyID(key), path)
	}
	stats, err := server.Reseal(ctx, st, keys)
	fmt.Fprintf(out, "resealed %d objects with key %s (%d already were)\n", stats.Resealed, server.SecretKeyID(keys[0]), stats.Current)
	if err != nil {
		return fmt.Errorf("%w\nthe older keys stay in %s; fix or delete those objects and run again with --reseal-only", err, path)
	}
	if cfg.Retire && len(keys) > 1 {
		if err := writeKeyFile(path, keys[:1]); err != nil {
			return err
		}
		fmt.Fprintf(out, "retired %d older keys from %s\n", len(keys)-1, path)
	}
	return nil
}

// writeKeyFile replaces the key file atomically, with mode 0600.
func writeKeyFile(path string, keys [][]byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-key-*")
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(server.FormatSecretKeys(keys)); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	return nil
}
