#!/usr/bin/env bash
# make demo / make demo-down: run qleet server in the background and apply examples/quickstart with the
# locally built provider (dev_overrides). Safe to run twice, or again after Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
demo="$root/.qleet-demo"
bin="$root/bin"
listen="${QLEET_DEMO_LISTEN:-127.0.0.1:8080}"
endpoint="http://$listen"
pidfile="$demo/server.pid"

say() { printf '\033[1m>> %s\033[0m\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

# ready asks /readyz with bash's own /dev/tcp, so the demo needs no curl. bash reports a refused
# connection on the shell's stderr, so the probe runs in a group whose stderr is discarded.
ready() {
  local line
  { exec 3<>"/dev/tcp/${listen%:*}/${listen##*:}"; } 2>/dev/null || return 1
  printf 'GET /readyz HTTP/1.0\r\nHost: %s\r\n\r\n' "$listen" >&3
  IFS= read -r -t 5 line <&3 || line=""
  exec 3<&- 3>&-
  [[ $line == "HTTP/1."?" 200"* ]]
}

# inventory lists what down destroys, before it does.
inventory() {
  local found=0
  if [ -d "$demo/tf" ] && running && [ -f "$demo/tf/terraform.tfstate" ]; then
    echo "  the quickstart's Terraform resources (terraform destroy):"
    tf state list 2>/dev/null | sed 's/^/    /'
    found=1
  fi
  if running && [ -x "$bin/qleet" ] && [ -f "$demo/data/admin.token" ]; then
    local rts
    rts=$(QLEET_ENDPOINT="$endpoint" QLEET_TOKEN="$(cat "$demo/data/admin.token")" QLEET_CONFIG=/dev/null \
      "$bin/qleet" get kubernetes_runtimes 2>/dev/null | awk 'NR > 1 {print $1}')
    if [ -n "$rts" ]; then
      echo "  the kubesim clusters QleetOS started for them (kubernetes_runtimes):"
      printf '    %s\n' $rts
    fi
  fi
  if running; then
    echo "  qleet server (pid $(cat "$pidfile"), $endpoint)"
    found=1
  fi
  if [ -d "$demo" ]; then
    echo "  $demo: the demo's data dir (database, NATS store, tokens, cluster state; $(du -sh "$demo" 2>/dev/null | cut -f1))"
    found=1
  fi
  [ "$found" = 1 ]
}

down() {
  say "make demo-down destroys:"
  if ! inventory; then
    echo "  nothing: no demo is running and $demo does not exist"
    return 0
  fi
  if [ -d "$demo/tf" ] && running && [ -f "$demo/tf/terraform.tfstate" ]; then
    say "destroying the quickstart with terraform"
    local out
    if out=$(tf destroy -auto-approve -input=false -no-color 2>&1); then
      grep -E '^Destroy complete' <<<"$out" || true
    else
      tail -5 <<<"$out" >&2
      say "terraform destroy failed (above); removing the demo anyway"
    fi
  fi
  if running; then
    say "stopping qleet server (pid $(cat "$pidfile"))"
    kill "$(cat "$pidfile")" 2>/dev/null || true
    for _ in $(seq 1 100); do running || break; sleep 0.2; done
    running && kill -9 "$(cat "$pidfile")" 2>/dev/null || true
  fi
  say "removing $demo"
  rm -rf "$demo"
  say "demo removed"
}

tf() {
  TF_CLI_CONFIG_FILE="$demo/terraformrc" QLEET_ENDPOINT="$endpoint" QLEET_TOKEN="$(cat "$demo/data/admin.token")" \
    TF_IN_AUTOMATION=1 "$("$root/scripts/find-terraform.sh")" -chdir="$demo/tf" "$@"
}

up() {
  command -v go >/dev/null || die "Go is not installed: install Go 1.26 or newer from https://go.dev/dl/"
  [ -x "$bin/qleet" ] && [ -x "$bin/kubesim" ] && "$root/scripts/find-terraform.sh" >/dev/null || die "binaries missing: run 'make demo', not this script"
  mkdir -p "$demo/data"
  if running; then
    say "qleet server already running (pid $(cat "$pidfile")), reusing it"
  else
    if (exec 3<>"/dev/tcp/${listen%:*}/${listen##*:}") 2>/dev/null; then
      die "port ${listen##*:} is taken by another program: stop it, or set QLEET_DEMO_LISTEN=127.0.0.1:<port>"
    fi
    say "starting qleet server on $endpoint (log: $demo/server.log)"
    nohup "$bin/qleet" server --data-dir "$demo/data" --listen "$listen" --support-chart-dir "$root/charts/support" > "$demo/server.log" 2>&1 &
    echo $! > "$pidfile"
    for _ in $(seq 1 100); do
      ready && break
      running || { tail -20 "$demo/server.log" >&2; die "qleet server exited during start-up (see above)"; }
      sleep 0.1
    done
    ready || die "qleet server did not become ready; see $demo/server.log"
  fi
  say "qleet server is ready: API $endpoint, web view $endpoint/ui"

  cat > "$demo/terraformrc" <<RC
provider_installation {
  dev_overrides {
    "qleetos/qleet" = "$bin"
  }
  direct {}
}
RC
  mkdir -p "$demo/tf"
  cp "$root"/examples/quickstart/*.tf "$demo/tf/"

  say "terraform apply examples/quickstart (a runtime profile, a definition with autoscaling, an instance placed in two regions: two kubesim clusters are provisioned, with metrics-server for the autoscaler, and a gateway with TLS: ingress and cert-manager are installed on both)"
  say "waiting for the controllers to report each object reconciled; the local cluster takes a few seconds to start"
  tf apply -auto-approve -input=false

  export QLEET_ENDPOINT="$endpoint" QLEET_TOKEN="$(cat "$demo/data/admin.token")" QLEET_DATA_DIR="$demo/data"
  say "objects in the control plane"
  for k in runtime_profiles kubernetes_runtimes workload_definitions workload_instances gateways support_services; do
    echo "--- $k"; "$bin/qleet" get "$k"
  done
  for inst in $("$bin/qleet" get workload_instances -o json | sed -n 's/^    "name": "\(.*\)",$/\1/p'); do
    say "qleet describe workload_instance $inst"
    "$bin/qleet" describe workload_instance "$inst"
    say "qleet graph workload_instance $inst"
    "$bin/qleet" graph workload_instance "$inst"
    say "pods of $inst in each of its clusters"
    "$bin/qleet" pods "$inst"
  done
  cat <<MSG

The demo is running.
  Web view:  $endpoint/ui   (sign in with the admin token in $demo/data/admin.token)
  API:       $endpoint/v1
Explore it from the CLI:
  export QLEET_ENDPOINT=$endpoint QLEET_TOKEN=\$(cat $demo/data/admin.token) QLEET_DATA_DIR=$demo/data
  # or, once, instead of the variables: bin/qleet login $endpoint --token \$(cat $demo/data/admin.token) --name demo
  bin/qleet get workload_instances -o wide --watch             # Ctrl-C to stop
  bin/qleet describe workload_instance <name>
  bin/qleet events workload_instance <name> --watch
  bin/qleet pods <name>                                        # simulated pods: kubesim runs no container
  bin/qleet graph                                              # the dependency graph
  bin/qleet image set <definition> <container> nginx:1.27      # roll out a new image
  curl -H "Authorization: Bearer \$QLEET_TOKEN" $endpoint/v1/workload_instances
  TF_CLI_CONFIG_FILE=$demo/terraformrc $("$root/scripts/find-terraform.sh") -chdir=$demo/tf plan
Clean up with: make demo-down (it lists what it destroys first)
MSG
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) die "usage: $0 up|down" ;;
esac
