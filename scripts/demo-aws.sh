#!/usr/bin/env bash
# make demo-aws / make demo-aws-down: the AWS path against a local AWS stand-in (internal/awssim): start
# the stand-in (its EKS clusters are kubesim clusters) and qleet server in the background, apply
# examples/aws with the locally built provider, and show the AWS calls it made, per service. down
# destroys it and shows that nothing is left in the stand-in. Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
demo="$root/.qleet-demo-aws"
bin="$root/bin"
listen="${QLEET_DEMO_AWS_LISTEN:-127.0.0.1:8081}"
aws_listen="${QLEET_DEMO_AWS_SIM:-127.0.0.1:4566}"
endpoint="http://$listen"
aws_url="http://$aws_listen"

say() { printf '\033[1m>> %s\033[0m\n' "$*"; }
die() { printf 'demo-aws: %s\n' "$*" >&2; exit 1; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# get prints the body of an HTTP GET with bash's own /dev/tcp (no curl needed); empty when nothing answers.
get() {
  local hostport=$1 path=$2
  { exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}"; } 2>/dev/null || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$hostport" >&3
  sed '1,/^\r$/d' <&3
  exec 3<&- 3>&-
}

# calls counts the stand-in's calls per service (the STS checks of EKS tokens apart).
calls() {
  local body
  body=$(get "$aws_listen" /_awssim/calls || true)
  printf '%s\n' "$body" | grep -o '"service": *"[a-z0-9]*"' | cut -d'"' -f4 | sort | uniq -c | awk '{printf "    %-8s %s\n", $2, $1}' || true
  printf '    (of the sts calls, EKS token checks by the clusters: %s)\n' "$(printf '%s\n' "$body" | grep -c '"via": *"eks-token"' || true)"
}

tf() {
  TF_CLI_CONFIG_FILE="$demo/terraformrc" QLEET_ENDPOINT="$endpoint" QLEET_TOKEN="$(cat "$demo/data/admin.token")" \
    TF_IN_AUTOMATION=1 "$("$root/scripts/find-terraform.sh")" -chdir="$demo/tf" "$@"
}

stop() {
  local pidfile=$1 what=$2
  alive "$pidfile" || return 0
  say "stopping $what (pid $(cat "$pidfile"))"
  kill "$(cat "$pidfile")" 2>/dev/null || true
  for _ in $(seq 1 150); do alive "$pidfile" || return 0; sleep 0.2; done
  kill -9 "$(cat "$pidfile")" 2>/dev/null || true
}

up() {
  for b in qleet kubesim awssim terraform-provider-qleet; do
    [ -x "$bin/$b" ] || die "bin/$b is missing: run 'make demo-aws', not this script"
  done
  "$root/scripts/find-terraform.sh" >/dev/null || die "no terraform: run 'make demo-aws', not this script"
  mkdir -p "$demo/data"
  if alive "$demo/awssim.pid"; then
    say "AWS stand-in already running (pid $(cat "$demo/awssim.pid")), reusing it"
  else
    say "starting the AWS stand-in on $aws_url (log: $demo/awssim.log)"
    QLEET_KUBESIM_BIN="$bin/kubesim" nohup "$bin/awssim" -addr "$aws_listen" -data-dir "$demo/awssim" > "$demo/awssim.json" 2> "$demo/awssim.log" &
    echo $! > "$demo/awssim.pid"
    for _ in $(seq 1 100); do grep -q '"ready":true' "$demo/awssim.json" 2>/dev/null && break; sleep 0.1; done
    grep -q '"ready":true' "$demo/awssim.json" || { tail -20 "$demo/awssim.log" >&2; die "the stand-in did not start"; }
  fi
  key=$(grep -o '"access_key_id":"[^"]*"' "$demo/awssim.json" | cut -d'"' -f4)
  secret=$(grep -o '"secret_access_key":"[^"]*"' "$demo/awssim.json" | cut -d'"' -f4)
  if alive "$demo/server.pid"; then
    say "qleet server already running (pid $(cat "$demo/server.pid")), reusing it"
  else
    say "starting qleet server on $endpoint (log: $demo/server.log)"
    # A short owner grace: the runtime provisioned from the profile is removed (with its EKS cluster) soon
    # after destroy deletes the profile, and the cloud account, which it needs to clean up, goes after it.
    nohup "$bin/qleet" server --data-dir "$demo/data" --listen "$listen" --owner-grace 15s > "$demo/server.log" 2>&1 &
    echo $! > "$demo/server.pid"
    for _ in $(seq 1 150); do [ -f "$demo/data/admin.token" ] && get "$listen" /readyz >/dev/null && break; sleep 0.1; done
    [ -f "$demo/data/admin.token" ] || { tail -20 "$demo/server.log" >&2; die "qleet server did not start"; }
  fi
  cat > "$demo/terraformrc" <<RC
provider_installation {
  dev_overrides {
    "qleetos/qleet" = "$bin"
  }
  direct {}
}
RC
  mkdir -p "$demo/tf"
  cp "$root"/examples/aws/*.tf "$demo/tf/"
  cat > "$demo/tf/terraform.tfvars" <<VARS
aws_access_key_id     = "$key"
aws_secret_access_key = "$secret"
aws_endpoint          = "$aws_url"
VARS
  say "terraform apply examples/aws: a cloud account, an eks profile in us-east-1, and an app there with an RDS database and an S3 bucket"
  start=$(date +%s)
  tf apply -auto-approve -input=false
  say "applied in $(( $(date +%s) - start )) s; AWS calls per service, as the stand-in logged them:"
  calls
  export QLEET_ENDPOINT="$endpoint" QLEET_TOKEN="$(cat "$demo/data/admin.token")"
  say "qleet describe workload_instance shop"
  "$bin/qleet" describe workload_instance shop || true
  cat <<MSG

The AWS demo is running.
  AWS stand-in: $aws_url   (calls: $aws_url/_awssim/calls, resources: $aws_url/_awssim/resources)
  QleetOS API:  $endpoint/v1   (admin token in $demo/data/admin.token)
Clean up with: make demo-aws-down (terraform destroy, then it shows what is left in the stand-in: nothing)
MSG
}

down() {
  if [ -f "$demo/tf/terraform.tfstate" ] && alive "$demo/server.pid" && alive "$demo/awssim.pid"; then
    say "terraform destroy examples/aws"
    tf destroy -auto-approve -input=false -no-color | grep -E '^Destroy complete' || true
    say "resources left in the stand-in:"
    get "$aws_listen" /_awssim/resources; echo
  fi
  stop "$demo/server.pid" "qleet server"
  stop "$demo/awssim.pid" "the AWS stand-in"
  say "removing $demo"
  rm -rf "$demo"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) die "usage: $0 up|down" ;;
esac
