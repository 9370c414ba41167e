#!/usr/bin/env bash
# The main job, end to end, on the embedded defaults (what `make demo` runs):
# a private PostgreSQL under .oml/ in a scratch directory, a deployment key,
# init, tenants, a generated workload, the lake drain, and the audit and
# health commands. Steps whose command is not in this build of oml are
# skipped with a note, so the script grows with the binary. Everything is
# removed at the end, also on failure or Ctrl-C (set OML_DEMO_KEEP=1 to keep
# the cluster for poking around).
#
# Environment:
#   OML            the oml binary (default: bin/oml of this checkout)
#   OML_DEMO_DIR   working directory (default: a new /tmp/oml-demo.XXXXXX)
#   OML_DEMO_KEEP  1 = leave the cluster running and the directory in place
#
# To add a step, add a line below: step TITLE "NOUN VERB" ARGS...
# step_findings_ok tolerates exit code 1 ("ran and found problems") where the
# demo's injected poison rows are expected to be reported. Prefix a step with
# `after_init` when it needs the schema and the deployment genesis: it is
# skipped when `oml init` is not in this build yet.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OML=${OML:-$repo/bin/oml}
[[ $OML == /* ]] || OML="$PWD/$OML"
if [[ ! -x $OML ]]; then
  echo "demo: $OML is missing; run \`make build\` (or \`make demo\`) first" >&2
  exit 2
fi

created_dir=""
if [[ -n ${OML_DEMO_DIR:-} ]]; then
  work=$OML_DEMO_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/oml-demo.XXXXXX)
  created_dir=$work
fi
# The server runs as the postgres user when this runs as root; mktemp's 0700
# would keep it out.
chmod 755 "$work"
work=$(cd "$work" && pwd)

bold=""; reset=""
if [[ -t 1 ]]; then bold=$'\e[1m'; reset=$'\e[0m'; fi
n=0
header() { n=$((n + 1)); printf '\n%s== %d. %s%s\n' "$bold" "$n" "$*" "$reset"; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ ${OML_DEMO_KEEP:-} == 1 ]]; then
    # shellcheck disable=SC2016 # the $(...) is for the operator to type
    printf '\n%s== kept%s the cluster in %s: cd there and run eval "$(%s dev env)"; stop it with %s dev down --purge --dir %s\n' \
      "$bold" "$reset" "$work" "$OML" "$OML" "$work"
    exit "$rc"
  fi
  header "Clean up: oml dev down --purge"
  "$OML" dev down --purge --dir "$work" || rc=$?
  if [[ -n $created_dir ]]; then rm -rf "$created_dir"; fi
  if [[ $rc -eq 0 ]]; then
    printf '\n%sdemo: OK%s\n' "$bold" "$reset"
  else
    printf '\n%sdemo: FAILED (exit %d)%s\n' "$bold" "$rc" "$reset" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# has_cmd NOUN [VERB]: is this command in the binary? (`oml NOUN BADVERB
# --help` exits 0 with NOUN's help, so read the "Available Commands" list.)
has_cmd() {
  local parent=("${@:1:$#-1}") want=${!#} help
  help=$("$OML" "${parent[@]}" --help 2>/dev/null) || return 1
  awk '/^Available Commands:/ {on=1; next} /^[^ ]/ {on=0} on && NF {print $1}' <<<"$help" | grep -qx -- "$want"
}

# step TITLE "NOUN [VERB]" ARGS...: run `oml NOUN VERB ARGS...` if it exists.
# The command must exit 0.
step() { run_step 0 "$@"; }
# step_findings_ok: like step, but exit code 1 (findings) is reported, not fatal.
step_findings_ok() { run_step 1 "$@"; }

# ran is 1 when the last step's command existed and ran.
ran=0
initialized=0

# after_init STEP...: run the step only once `oml init` has run.
after_init() {
  if [[ $initialized -eq 1 ]]; then
    "$@"
    return
  fi
  header "$2"
  local words
  read -r -a words <<<"$3"
  if has_cmd "${words[@]}"; then
    echo "(skipped: \`oml $3\` needs the schema and genesis from \`oml init\`, which is not in this build)"
  else
    echo "(skipped: \`oml $3\` is not in this build)"
  fi
}

run_step() {
  local allow=$1 title=$2 path=$3
  shift 3
  local words
  read -r -a words <<<"$path"
  header "$title"
  ran=0
  if ! has_cmd "${words[@]}"; then
    echo "(skipped: \`oml $path\` is not in this build)"
    return 0
  fi
  ran=1
  echo "+ oml $path $*"
  local rc=0
  "$OML" "${words[@]}" "$@" || rc=$?
  if [[ $rc -eq 1 && $allow -eq 1 ]]; then
    echo "(exit 1: the command reported findings above; the demo injects poison rows on purpose)"
  elif [[ $rc -ne 0 ]]; then
    echo "demo: \`oml $path\` failed with exit code $rc" >&2
    return "$rc"
  fi
}

cd "$work"
echo "demo: working in $work with $("$OML" version)"

header "Start a private PostgreSQL: oml dev up"
"$OML" dev up
eval "$("$OML" dev env)"
echo "OML_DATABASE_URL=$OML_DATABASE_URL"
echo "OML_LAKE_URL=$OML_LAKE_URL"

export OML_SIGNING_KEY_FILE="$work/.oml/signing.key"
step "Deployment key" "key generate" --out "$OML_SIGNING_KEY_FILE"
step "Schema and deployment genesis" "init"
initialized=$ran
after_init step "Create tenant acme" "tenant create" acme
after_init step "Create tenant globex" "tenant create" globex
after_init step "List tenants" "tenant list"
after_init step "Workload through the real append path" "dev load" --tenants 3 --claims 100 --poison 1 --seed 42
after_init step "Drain the outbox into the lake" "lake drain" --once
after_init step "Lake status" "lake status"

# Inspect one customer tenant's tables by URL (tenant ids are generated; the
# all-zero provider tenant only as a last resort).
tenant_dir=""
if [[ -d $work/.oml/lake ]]; then
  tenant_dir=$(find "$work/.oml/lake" -mindepth 3 -maxdepth 3 -path '*/bronze/events' -type d 2>/dev/null |
    sed 's#/bronze/events$##' | sort | awk '!/\/00000000-0000-0000-0000-000000000000$/ {print; found=1; exit} {first=first ? first : $0} END {if (!found && first) print first}')
fi
if [[ -n $tenant_dir ]]; then
  step "A tenant's bronze table (one row per journal event)" "lake inspect" "file://$tenant_dir/bronze/events"
  step "Its commits" "lake history" "file://$tenant_dir/bronze/events"
  if [[ -d $tenant_dir/silver/claims ]]; then
    step "The same tenant's silver claims (promoted bodies, ciphertext only)" "lake inspect" "file://$tenant_dir/silver/claims"
  fi
else
  header "A tenant's tables"
  echo "(skipped: no Delta table under $work/.oml/lake yet)"
fi

after_init step "Verify every chain" "chain verify"
after_init step "Chain heads" "chain head"
after_init step_findings_ok "Dead letters" "deadletter list"
after_init step_findings_ok "Lake against the journal" "reconcile"
after_init step_findings_ok "Summary" "status"
after_init step_findings_ok "Health checks" "doctor"

# The repair loop (docs/deadletter.md): the workload planted one poison row
# (a held body with one byte appended, so it no longer hashes to its
# journalled digest); the drain dead-lettered it. Show it, repair the cause
# (drop the byte, only where that makes the body hash to the journalled
# ciphertext digest again), re-enqueue (a journalled deadletter.reenqueued),
# drain, and reconcile clean.
repair_demo() {
  local dl psql_bin
  dl=$("$OML" deadletter list 2>/dev/null | awk -F'\t' 'NR == 2 {print $1}')
  psql_bin=$(command -v psql || true)
  if [[ -z $psql_bin && -x "$(pg_config --bindir 2>/dev/null)/psql" ]]; then psql_bin="$(pg_config --bindir)/psql"; fi
  if [[ -z $dl || -z $psql_bin ]]; then
    header "Repair a dead letter"
    echo "(skipped: $([[ -z $dl ]] && echo "no open dead letter" || echo "no psql to repair the held body with"))"
    return 0
  fi
  step "The dead letter in full" "deadletter show" "$dl"
  header "Repair the cause: restore the held body's bytes"
  echo "+ psql: drop the appended byte where that makes the body hash to the journalled digest"
  "$psql_bin" "$OML_DATABASE_URL" -v ON_ERROR_STOP=1 -q -c "
UPDATE oml.claim_bodies b SET ciphertext = substring(b.ciphertext FROM 1 FOR length(b.ciphertext) - 1)
  FROM oml.claims c
 WHERE c.tenant_id = b.tenant_id AND c.artifact_id = b.artifact_id AND c.version = b.version
   AND sha256(b.ciphertext) <> c.ciphertext_digest
   AND sha256(substring(b.ciphertext FROM 1 FOR length(b.ciphertext) - 1)) = c.ciphertext_digest"
  step "Re-enqueue it (journalled)" "deadletter reenqueue" --all --yes --reason "demo: restored the held body"
  step "Re-enqueue again: nothing to do" "deadletter reenqueue" "$dl"
  step "Drain the repaired row" "lake drain" --once
  step "No open dead letters" "deadletter list"
  step "The lake agrees with the journal fold" "reconcile"
  step "The chains verify, repair events included" "chain verify"
  step "Summary after the repair" "status"
}
if [[ $initialized -eq 1 ]]; then
  repair_demo
fi

# The demo ends where on-call starts: every health check (docs/doctor.md).
after_init step_findings_ok "Health checks after the repair" "doctor"
