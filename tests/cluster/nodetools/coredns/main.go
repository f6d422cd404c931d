// Command coredns is the cluster DNS of the devcluster's real node: CoreDNS (built from its
// Go module) with only the plugins tests/cluster/devcluster.py writes into the Corefile.
// Fewer plugins than the upstream binary means a much smaller dependency graph to download
// and compile (no cloud SDKs), and nothing in the binary that could forward a query away
// from the machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func init() {
	// The plugin chain in CoreDNS's own order (core/dnsserver/zdirectives.go upstream),
	// restricted to the plugins linked in above.
	dnsserver.Directives = []string{
		"bind",
		"ready",
		"health",
		"errors",
		"log",
		"template",
		"kubernetes",
	}
}

func main() {
	coremain.Run()
}
