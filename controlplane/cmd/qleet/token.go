package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/qleetos/terraform-provider-qleet/client"
)

// runToken serves `qleet token create|list|revoke`.
func runToken(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError{"token: missing verb (create, list or revoke)"}
	}
	verb, args := args[0], args[1:]
	fs := flag.NewFlagSet("token "+verb, flag.ContinueOnError)
	name := fs.String("name", "", "create: what the token is for, e.g. ci")
	role := fs.String("role", "", "create: admin, developer, viewer or controller")
	ttl := fs.Duration("ttl", 0, "create: the token expires after this long, e.g. 720h (default: never)")
	output := fs.String("o", "table", "list: output format, table or json")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	cl, err := newClient()
	if err != nil {
		return err
	}
	switch verb {
	case "create":
		req := client.TokenRequest{Name: *name, Role: *role}
		if *ttl > 0 {
			exp := time.Now().Add(*ttl).UTC().Truncate(time.Second)
			req.ExpiresAt = &exp
		}
		tok, err := cl.Tokens().Create(ctx, req)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "token %q (id %s, role %s) created; it is shown once:\n", tok.Name, tok.ID, tok.Role)
		fmt.Println(tok.Token)
		return nil
	case "list":
		toks, err := cl.Tokens().List(ctx)
		if err != nil {
			return err
		}
		if *output == "json" {
			return printJSON(toks)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tROLE\tCREATED\tEXPIRES")
		for _, t := range toks {
			exp := "never"
			if t.ExpiresAt != nil {
				exp = t.ExpiresAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, t.CreatedAt.Format(time.RFC3339), exp)
		}
		return tw.Flush()
	case "revoke":
		if fs.NArg() != 1 {
			return usageError{"token revoke: give one token id (see qleet token list)"}
		}
		if err := cl.Tokens().Revoke(ctx, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Printf("token %s revoked\n", fs.Arg(0))
		return nil
	}
	return usageError{fmt.Sprintf("token: unknown verb %q (create, list or revoke)", verb)}
}
