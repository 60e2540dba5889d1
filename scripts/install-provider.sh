#!/usr/bin/env bash
# make install-provider: build the provider and put it in Terraform's implicit local filesystem mirror,
# ~/.terraform.d/plugins/registry.terraform.io/qleetos/qleet/<version>/<os>_<arch>/, so that a plain
# `terraform init && terraform apply` installs qleetos/qleet from there: no dev_overrides, no CLI config.
# OpenTofu's copy goes under registry.opentofu.org/qleetos/qleet beside it.
# Terraform reads that directory only when no CLI config has a provider_installation block; this script
# says so when yours has one. The provider tests (provider/examples_header_test.go) run this script too.
#
# Each build gets a new version, 0.1.<UTC time as YYYYMMDDhhmmss>, and the previous ones are removed: a
# directory initialised before keeps its locked build until `terraform init -upgrade` (Terraform's lock
# file refuses a different binary under a version it has recorded, so a fixed version would need the lock
# file deleted instead).
#
#   PROVIDER_VERSION  the version to install as, instead (MAJOR.MINOR.PATCH: terraform skips pre-releases)
#   PLUGIN_DIR        the mirror (default $HOME/.terraform.d/plugins)
set -euo pipefail
cd "$(dirname "$0")/.."

go=${GO:-go}
version=${PROVIDER_VERSION:-0.1.$(date -u +%Y%m%d%H%M%S)}
plugins=${PLUGIN_DIR:-$HOME/.terraform.d/plugins}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || {
  echo "install-provider: PROVIDER_VERSION must be MAJOR.MINOR.PATCH (terraform init skips pre-releases), not '$version'" >&2
  exit 1
}
platform="$("$go" env GOOS)_$("$go" env GOARCH)"
ns="$plugins/registry.terraform.io/qleetos/qleet"
dir="$ns/$version/$platform"

echo ">> building terraform-provider-qleet $version for $platform"
mkdir -p "$dir"
# Build next to the target and rename: a terraform running the old binary is not disturbed.
"$go" build -ldflags "-X main.version=$version" -o "$dir/.terraform-provider-qleet.new" .
mv -f "$dir/.terraform-provider-qleet.new" "$dir/terraform-provider-qleet_v$version"
for old in "$ns"/*; do
  if [ "$old" != "$ns/$version" ] && [ -d "$old" ]; then
    echo ">> removing $old (an earlier build)"
    rm -rf "$old"
  fi
done
echo ">> installed $dir/terraform-provider-qleet_v$version"
# OpenTofu reads the same directory, but resolves qleetos/qleet on its own registry's host: the same build
# there too (a hard link), so that a plain `tofu init` works as well.
tofu_ns="$plugins/registry.opentofu.org/qleetos/qleet"
rm -rf "$tofu_ns" && mkdir -p "$tofu_ns/$version/$platform"
ln -f "$dir/terraform-provider-qleet_v$version" "$tofu_ns/$version/$platform/" 2>/dev/null ||
  cp "$dir/terraform-provider-qleet_v$version" "$tofu_ns/$version/$platform/"

# Terraform ignores the implicit mirror when a CLI config has a provider_installation block.
cfg=${TF_CLI_CONFIG_FILE:-${TERRAFORM_CONFIG:-$HOME/.terraformrc}}
if [ -f "$cfg" ] && grep -q 'provider_installation' "$cfg"; then
  echo ">> note: $cfg has a provider_installation block, so Terraform does not read $plugins." >&2
  echo "   Unset TF_CLI_CONFIG_FILE (or remove the block; dev_overrides are not needed any more)." >&2
fi
echo ">> in an example: terraform init && terraform apply (after a rebuild in a directory initialised before: terraform init -upgrade)"
