package helm

import "embed"

// Chart is the chart in deploy/helm/qleet, embedded so that `qleet up` installs the chart of its own
// release without a checkout. Its root is the directory "qleet".
//
//go:embed all:qleet
var Chart embed.FS
