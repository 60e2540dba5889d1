package requirements

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qleetos/terraform-provider-qleet/api"
)

func TestForGateway(t *testing.T) {
	off := false
	tests := []struct {
		name   string
		spec   api.GatewaySpec
		inZone bool
		want   []string
	}{
		{"a plain gateway needs ingress only", api.GatewaySpec{TLS: &off}, false, []string{"ingress"}},
		{"a gateway with hosts has TLS by default and needs cert-manager", api.GatewaySpec{Hosts: []string{"a.example.com"}}, false, []string{"ingress", "cert-manager"}},
		{"a host in a domain name's zone needs external-dns", api.GatewaySpec{Hosts: []string{"a.example.com"}, TLS: &off}, true, []string{"ingress", "external-dns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ForGateway(&tt.spec, tt.inZone))
		})
	}
}

func TestName(t *testing.T) {
	require.Equal(t, "ingress-eu", Name("ingress", "eu"))
	long := Name("cert-manager", strings.Repeat("r", 60))
	require.Len(t, long, 63, "a name stays a DNS label")
}
