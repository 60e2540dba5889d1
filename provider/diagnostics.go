package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/qleetos/terraform-provider-qleet/api"
)

// hasPath reports whether a schema has an attribute at a path.
type hasPath func(ctx context.Context, p path.Path) bool

// schemaHasPath returns the hasPath of a resource schema.
func schemaHasPath(sch rschema.Schema) hasPath {
	return func(ctx context.Context, p path.Path) bool {
		_, d := sch.TypeAtPath(ctx, p)
		return !d.HasError()
	}
}

// apiDiagnostics turns an API error into diagnostics. Validation errors become attribute errors at the
// attribute their field path names (or the nearest enclosing one), so that Terraform shows them at the
// right line of the configuration; other errors get a one-line explanation of what to check.
func apiDiagnostics(ctx context.Context, has hasPath, renames map[string]string, summary string, err error) diag.Diagnostics {
	var diags diag.Diagnostics
	var apiErr *api.Error
	if !errors.As(err, &apiErr) {
		diags.AddError(summary, err.Error())
		return diags
	}
	switch apiErr.Code {
	case api.CodeInvalid:
		fields := apiErr.Fields
		if len(fields) == 0 {
			fields = []api.FieldError{{Field: apiErr.Field, Message: apiErr.Message}}
		}
		for _, fe := range fields {
			p := nearestPath(ctx, has, fieldPath(fe.Field, renames))
			detail := fmt.Sprintf("The QleetOS API rejected %s: %s", fe.Field, fe.Message)
			if len(p.Steps()) == 0 {
				diags.AddError(summary, detail)
				continue
			}
			diags.AddAttributeError(p, summary, detail)
		}
	case api.CodeUnauthorized:
		diags.AddError(summary, "The QleetOS API rejected the token (unauthorized); check the provider's token or "+EnvToken+".")
	case api.CodeForbidden:
		diags.AddError(summary, "The token's role may not do this ("+apiErr.Message+"); use a developer or admin token.")
	case api.CodeConflict:
		diags.AddError(summary, apiErr.Error()+conflictHint(apiErr))
	default:
		diags.AddError(summary, apiErr.Error())
	}
	return diags
}

func conflictHint(e *api.Error) string {
	if len(e.Dependents) > 0 {
		return "\n\nDelete the dependent objects first (in Terraform, reference this object from them so that Terraform orders the deletes)."
	}
	return ""
}

// fieldPath converts an API field path such as `spec.containers[0].ports[1].container_port` or
// `labels["app"]` to an attribute path. The spec's fields are top-level attributes, so "spec." is dropped.
// renames maps top-level spec field names to attribute names where they differ.
// It returns the empty path for fields that name no attribute (e.g. "spec" itself).
func fieldPath(field string, renames map[string]string) path.Path {
	p := path.Empty()
	rest := strings.TrimPrefix(field, "spec.")
	if rest == "spec" || rest == "" {
		return p
	}
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
		case '[':
			if strings.HasPrefix(rest, `["`) {
				key, err := strconv.QuotedPrefix(rest[1:])
				if err != nil {
					return p
				}
				k, _ := strconv.Unquote(key)
				p = p.AtMapKey(k)
				rest = strings.TrimPrefix(rest[1+len(key):], "]")
				continue
			}
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return p
			}
			n, err := strconv.Atoi(rest[1:end])
			if err != nil {
				return p
			}
			p = p.AtListIndex(n)
			rest = rest[end+1:]
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			name := rest[:end]
			if r, ok := renames[name]; ok && len(p.Steps()) == 0 {
				name = r
			}
			p = p.AtName(name)
			rest = rest[end:]
		}
	}
	return p
}

// nearestPath returns p, or its nearest ancestor that the schema has.
func nearestPath(ctx context.Context, has hasPath, p path.Path) path.Path {
	if has == nil {
		return path.Empty()
	}
	for len(p.Steps()) > 0 {
		if has(ctx, p) {
			return p
		}
		p = p.ParentPath()
	}
	return p
}
