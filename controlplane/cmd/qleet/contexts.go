package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/qleetos/terraform-provider-qleet/client"
)

// configFile is the CLI's config file: named contexts, each an endpoint with its credentials, like a
// kubeconfig.
type configFile struct {
	// CurrentContext names the context used when none is given.
	CurrentContext string `json:"current-context,omitempty"`
	// Contexts are the known endpoints.
	Contexts []configContext `json:"contexts"`
}

// configContext is one API endpoint and how to reach it.
type configContext struct {
	// Name names the context.
	Name string `json:"name"`
	// Endpoint is the API base URL.
	Endpoint string `json:"endpoint"`
	// Token is the bearer token.
	Token string `json:"token,omitempty"`
	// CACert is the path of the PEM CA certificate of a TLS endpoint.
	CACert string `json:"ca-cert,omitempty"`
}

func (c *configFile) find(name string) *configContext {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

// configPath is $QLEET_CONFIG, else $XDG_CONFIG_HOME/qleet/config.yaml, else ~/.config/qleet/config.yaml.
func (q *cli) configPath() (string, error) {
	if p := q.getenv("QLEET_CONFIG"); p != "" {
		return p, nil
	}
	if x := q.getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "qleet", "config.yaml"), nil
	}
	home := q.getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("config file: set QLEET_CONFIG or HOME: %w", err)
		}
	}
	return filepath.Join(home, ".config", "qleet", "config.yaml"), nil
}

// loadConfig reads the config file; a missing file is an empty config.
func (q *cli) loadConfig() (*configFile, string, error) {
	path, err := q.configPath()
	if err != nil {
		return nil, "", err
	}
	cfg := &configFile{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, path, nil
	}
	if err != nil {
		return nil, path, fmt.Errorf("config file: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, path, fmt.Errorf("config file %s: %w", path, err)
	}
	return cfg, path, nil
}

// saveConfig writes the config file with mode 0600 (it holds tokens), replacing it in one rename.
func saveConfig(path string, cfg *configFile) error {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("config file: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("config file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	return nil
}

func (q *cli) loginCmd() *cobra.Command {
	var name, token, caCert string
	cmd := &cobra.Command{
		Use:   "login ENDPOINT --token TOKEN [--name CONTEXT] [--ca-cert PATH]",
		Short: "Save an endpoint and its token as a context of the config file, and make it current",
		Long: `login checks that the API at ENDPOINT accepts the token, then saves both as a context of the config
file ($QLEET_CONFIG, else $XDG_CONFIG_HOME/qleet/config.yaml, else ~/.config/qleet/config.yaml; mode
0600) and makes it the current context, so that later commands need no flags or environment.`,
		Example: `  qleet login http://127.0.0.1:8080 --token "$(cat .qleet/admin.token)" --name local
  qleet login https://qleet.example.com:8443 --token qlt_... --ca-cert ./ca.crt --name prod`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			endpoint := args[0]
			u, err := url.Parse(endpoint)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("login: ENDPOINT must be an http or https URL, e.g. http://127.0.0.1:8080")
			}
			if token == "" {
				token = q.getenv("QLEET_TOKEN")
			}
			if token == "" {
				return usagef("login: --token is required (or QLEET_TOKEN)")
			}
			if name == "" {
				name = u.Host
			}
			if caCert != "" {
				if caCert, err = filepath.Abs(caCert); err != nil {
					return err
				}
			}
			ctxt := configContext{Name: name, Endpoint: endpoint, Token: token, CACert: caCert}
			cl, err := newAPIClient(connection{Endpoint: endpoint, Token: token, CACert: caCert})
			if err != nil {
				return err
			}
			vctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
			defer cancel()
			if _, err := cl.KubernetesRuntimes().List(vctx, client.ListOptions{Limit: 1}); err != nil {
				q.conn.endpoint = endpoint
				return fmt.Errorf("login: %w", q.explain(err))
			}
			cfg, path, err := q.loadConfig()
			if err != nil {
				return err
			}
			if c := cfg.find(name); c != nil {
				*c = ctxt
			} else {
				cfg.Contexts = append(cfg.Contexts, ctxt)
			}
			cfg.CurrentContext = name
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "logged in to %s; context %q is current (%s)\n", endpoint, name, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the bearer token (default: QLEET_TOKEN); see qleet token create")
	cmd.Flags().StringVar(&name, "name", "", "the context's name (default: the endpoint's host:port)")
	cmd.Flags().StringVar(&caCert, "ca-cert", "", "the CA certificate (PEM file) of a TLS endpoint, e.g. <data-dir>/tls.crt")
	return cmd
}

func (q *cli) configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show and switch the contexts of the config file",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	completeContexts := func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cfg, _, err := q.loadConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		for _, c := range cfg.Contexts {
			names = append(names, c.Name+"\t"+c.Endpoint)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	var output string
	getContexts := &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts (tokens are not shown)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cfg, _, err := q.loadConfig()
			if err != nil {
				return err
			}
			type row struct {
				Name     string `json:"name"`
				Endpoint string `json:"endpoint"`
				CACert   string `json:"ca-cert,omitempty"`
				Current  bool   `json:"current"`
			}
			rows := make([]row, 0, len(cfg.Contexts))
			for _, c := range cfg.Contexts {
				rows = append(rows, row{Name: c.Name, Endpoint: c.Endpoint, CACert: c.CACert, Current: c.Name == cfg.CurrentContext})
			}
			if structured(output) {
				return printStructured(cmd.OutOrStdout(), output, rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tENDPOINT\tCA-CERT")
			for _, r := range rows {
				mark := ""
				if r.Current {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, r.Name, r.Endpoint, orDash(r.CACert))
			}
			return tw.Flush()
		},
	}
	addOutputFlag(getContexts, &output)
	current := &cobra.Command{
		Use:   "current-context",
		Short: "Print the name of the current context",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := q.loadConfig()
			if err != nil {
				return err
			}
			if cfg.CurrentContext == "" {
				return fmt.Errorf("no current context in %s: run qleet login", path)
			}
			fmt.Fprintln(cmd.OutOrStdout(), cfg.CurrentContext)
			return nil
		},
	}
	use := &cobra.Command{
		Use:               "use-context NAME",
		Short:             "Make a context the current one",
		Args:              exactArgs(1),
		ValidArgsFunction: completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := q.loadConfig()
			if err != nil {
				return err
			}
			if cfg.find(args[0]) == nil {
				return fmt.Errorf("no context %q in %s (see qleet config get-contexts)", args[0], path)
			}
			cfg.CurrentContext = args[0]
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "switched to context %q\n", args[0])
			return nil
		},
	}
	del := &cobra.Command{
		Use:               "delete-context NAME",
		Short:             "Remove a context and its token from the config file",
		Args:              exactArgs(1),
		ValidArgsFunction: completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := q.loadConfig()
			if err != nil {
				return err
			}
			i := slices.IndexFunc(cfg.Contexts, func(c configContext) bool { return c.Name == args[0] })
			if i < 0 {
				return fmt.Errorf("no context %q in %s", args[0], path)
			}
			cfg.Contexts = slices.Delete(cfg.Contexts, i, i+1)
			if cfg.CurrentContext == args[0] {
				cfg.CurrentContext = ""
			}
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted context %q\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(getContexts, current, use, del)
	return cmd
}
