package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/qleetos/terraform-provider-qleet/api"
	"github.com/spf13/cobra"
)

// tokenCmd serves `qleet token create|list|revoke` (admin).
func (q *cli) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke API tokens (admin)",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	q.addConnFlags(cmd.PersistentFlags())

	var name, role string
	var ttl time.Duration
	create := &cobra.Command{
		Use:     "create --name NAME --role ROLE [--ttl 720h]",
		Short:   "Make an API token; it is shown once",
		Example: `  qleet token create --name ci --role developer --ttl 720h`,
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("ttl") && ttl < time.Second {
				// A zero or negative --ttl must not silently make a token that never expires.
				return usagef("--ttl %s: must be at least 1s (leave --ttl out for a token that never expires)", ttl)
			}
			cl, err := q.client()
			if err != nil {
				return err
			}
			req := api.TokenRequest{Name: name, Role: role}
			if ttl > 0 {
				exp := time.Now().Add(ttl).UTC().Truncate(time.Second)
				req.ExpiresAt = &exp
			}
			tok, err := cl.Tokens().Create(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "token %q (id %s, role %s) created; it is shown once:\n", tok.Name, tok.ID, tok.Role)
			fmt.Fprintln(cmd.OutOrStdout(), tok.Token)
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "what the token is for, e.g. ci")
	create.Flags().StringVar(&role, "role", "", "admin, developer, viewer or controller")
	create.Flags().DurationVar(&ttl, "ttl", 0, "the token expires after this long, at least 1s, e.g. 720h (default: never)")
	_ = create.RegisterFlagCompletionFunc("role", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return api.Roles, cobra.ShellCompDirectiveNoFileComp
	})

	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List API tokens: names, roles and expiry, never the tokens",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cl, err := q.client()
			if err != nil {
				return err
			}
			toks, err := cl.Tokens().List(cmd.Context())
			if err != nil {
				return err
			}
			if structured(output) {
				return printStructured(cmd.OutOrStdout(), output, toks)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tROLE\tCREATED\tEXPIRES")
			for _, t := range toks {
				exp := "never"
				if t.ExpiresAt != nil {
					exp = t.ExpiresAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, t.CreatedAt.Format(time.RFC3339), exp)
			}
			return tw.Flush()
		},
	}
	addOutputFlag(list, &output)

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API token at once (see qleet token list for ids)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := q.client()
			if err != nil {
				return err
			}
			if err := cl.Tokens().Revoke(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
