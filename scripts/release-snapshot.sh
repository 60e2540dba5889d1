#!/usr/bin/env bash
# make release-snapshot: everything a release ships, built locally and unsigned, into dist/:
#   qleet_<v>_<os>_<arch>.tar.gz               qleet for linux and darwin, amd64 and arm64
#   terraform-provider-qleet_<v>_<os>_<arch>.zip, _manifest.json, _SHA256SUMS   the provider packages
#   image/                                      the qleet image as an OCI layout (ghcr.io/qleetos/qleet:<v>)
#   qleet_<v>_image_linux_amd64.tar             the same image for docker load
#   qleet_<v>_linux_<arch>.spdx.json            the SBOM in each image, beside it
# With bin/goreleaser (make goreleaser) it runs `goreleaser release --snapshot --skip=sign` over .goreleaser.yml;
# without it (or with RELEASE_WITH_GORELEASER=0), go build loops that produce the same names; there
# QLEET_PLATFORMS and PROVIDER_PLATFORMS (space-separated os/arch) narrow a quick local run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dist=$root/dist
goreleaser=${GORELEASER:-$root/bin/goreleaser}
commit=$(git rev-parse HEAD)
short=$(git rev-parse --short HEAD)
created=$(git log -1 --format=%cI)

if [ "${RELEASE_WITH_GORELEASER:-1}" = 1 ] && [ -x "$goreleaser" ]; then
  echo ">> goreleaser release --snapshot --skip=sign (the provider for 13 platforms and qleet for 4: long when cold)"
  if [ -z "$(git remote)" ]; then
    # goreleaser reads the commit only after the remote's URL (git ls-remote --get-url); a checkout without
    # a remote (CI's clean copy) would stamp "none" as the commit. Name the project's, for this run only.
    export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url \
      GIT_CONFIG_VALUE_0=https://github.com/qleetos/terraform-provider-qleet.git
  fi
  "$goreleaser" release --snapshot --clean --skip=sign
  version=$(jq -r .version "$dist/metadata.json")
  # The release uploads the registry manifest beside the zips (release.extra_files) and SHA256SUMS lists
  # it; put it where the sums expect it, as the go build path does.
  cp terraform-registry-manifest.json "$dist/terraform-provider-qleet_${version}_manifest.json"
  bin_of() { ls "$dist"/qleet_linux_"$1"*/qleet; }
else
  echo ">> no bin/goreleaser: go build loops into dist/ (the provider for 13 platforms and qleet for 4: long when cold)"
  version=0.0.0-SNAPSHOT-$short
  rm -rf "$dist" && mkdir -p "$dist"
  for p in ${QLEET_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}; do
    os=${p%/*} arch=${p#*/} out=$dist/qleet_${os}_${arch}
    echo "   qleet $p"
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch scripts/go-progress.sh "qleet $p" -trimpath \
      -ldflags "-s -w -X main.version=v$version -X main.commit=$commit" -o "$out/qleet" ./controlplane/cmd/qleet
    cp README.md "$out/"
    tar -C "$out" -czf "$dist/qleet_${version}_${os}_${arch}.tar.gz" qleet README.md
  done
  pv=terraform-provider-qleet_$version
  # .goreleaser.yml's matrix and ignores: no darwin/386 or darwin/arm, and no windows/arm, which Go 1.26 dropped.
  all_provider=$(for os in linux darwin windows freebsd; do for arch in amd64 arm64 arm 386; do
    case $os/$arch in darwin/386|darwin/arm|windows/arm) ;; *) echo "$os/$arch" ;; esac; done; done)
  for p in ${PROVIDER_PLATFORMS:-$all_provider}; do
    os=${p%/*} arch=${p#*/}
    ext=; [ "$os" = windows ] && ext=.exe
    out=$dist/provider_${os}_${arch}
    echo "   provider $os/$arch"
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch scripts/go-progress.sh "provider $os/$arch" -trimpath -ldflags "-s -w -X main.version=$version" \
      -o "$out/terraform-provider-qleet_v$version$ext" .
    cp README.md "$out/"
    (cd "$out" && zip -q -X "$dist/${pv}_${os}_${arch}.zip" "terraform-provider-qleet_v$version$ext" README.md)
  done
  cp terraform-registry-manifest.json "$dist/${pv}_manifest.json"
  (cd "$dist" && sha256sum ./*.zip ./*.tar.gz "${pv}_manifest.json" | sed 's# \./# #' > "${pv}_SHA256SUMS")
  bin_of() { ls "$dist"/qleet_linux_"$1"/qleet; }
fi

echo ">> the qleet image $version (tools/image: OCI layout, docker tarball, SBOMs)"
binaries=()
for arch in amd64 arm64; do
  if b=$(bin_of "$arch" 2>/dev/null); then binaries+=(-binary "linux/$arch=$b"); fi
done
(cd tools/image && go run . "${binaries[@]}" \
  -version "$version" -revision "$commit" -created "$created" \
  -layout "$dist/image" -tar "$dist/qleet_${version}_image_linux_amd64.tar" -sbom-dir "$dist" \
  -chart "$root/deploy/helm/qleet")
(cd "$dist" && sha256sum "qleet_${version}_image_linux_amd64.tar" qleet_"${version}"_linux_*.spdx.json > "qleet_${version}_image_SHA256SUMS")
echo ">> checking every sum"
(cd "$dist" && sha256sum --quiet -c "terraform-provider-qleet_${version}_SHA256SUMS" "qleet_${version}_image_SHA256SUMS")
echo ">> dist/:"
ls -1 "$dist"
