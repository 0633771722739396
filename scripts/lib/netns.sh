# Pieces shared by the tests that run real natter nodes in network namespaces (netns-cluster.sh, routed-test.sh,
# overlay-test.sh): a run bounded in time that removes everything it made on exit, namespaces, nodes driven through
# FIFOs by their scripted REPL, and digests compared. Source it (bash) after setting:
#   script   the caller's name, for messages
#   binary   the natter executable
#   work     a temporary directory of the run (removed on exit unless KEEP is set)
# Every process started is stopped by PID, every namespace made is deleted, even on failure or interruption.

pids=()               # every background process, for the final clean-up
namespaces=()         # every namespace made, deleted on exit
declare -A nodepid    # node index -> PID of its current process
declare -A nodens     # node index -> namespace it runs in
declare -A nodeargs   # node index -> its `natter run` arguments after --data, one per line
running=()            # indices of the nodes running now (only these are sent commands)
watchdog=""
netns_cleaned=""

netns_cleanup() {
    set +e
    [ -z "$netns_cleaned" ] || return 0
    netns_cleaned=yes
    [ -z "$watchdog" ] || kill "$watchdog" 2>/dev/null
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
    for name in "${namespaces[@]}"; do ip netns del "$name" 2>/dev/null; done
    if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}

# Installs the clean-up and bounds the whole run: past SECONDS the script stops itself (and cleans up).
netns_begin() {  # seconds
    trap netns_cleanup EXIT
    trap 'echo "$script: interrupted" >&2; exit 1' INT TERM
    ( end=$((SECONDS + $1)); while [ $SECONDS -lt $end ]; do sleep 1; done
      echo "$script: timed out after $1 s" >&2; kill -TERM $$ ) &
    watchdog=$!
}

ns() { ip netns exec "$1" "${@:2}"; }

# A namespace with its loopback up, deleted on exit.
add_ns() {  # name
    ip netns add "$1"
    namespaces+=("$1")
    ns "$1" ip link set lo up
}

# A bridge (a switch) named br0 in a namespace of its own.
add_switch() {  # namespace
    add_ns "$1"
    ns "$1" ip link add br0 type bridge
    ns "$1" ip link set br0 up
}

# A veth from namespace `host` (interface `ifname`) to the bridge br0 in namespace `switch` (port `port`).
plug() {  # host ifname switch port
    ip link add "$2" netns "$1" type veth peer name "$4" netns "$3"
    ns "$3" ip link set "$4" master br0 up
    ns "$1" ip link set "$2" up
}

# A data directory for node `i` (display name node$i), its identity key in key$i, its command FIFO and output file.
init_node() {  # index [init options...]
    "$binary" init --data "$work/node$1" --name "node$1" "${@:2}" >/dev/null
    "$binary" id --data "$work/node$1" | awk '/^identity/ {print $2}' > "$work/key$1"
    mkfifo "$work/in$1"
    : > "$work/out$1"
}

# Starts node `i` in namespace `ns` with `natter run` arguments; with the index alone, restarts it as before. It
# reads commands from in$i (kept open by this shell across restarts) and appends what it prints to out$i; standard
# error goes to err$i for the first process and err$i.N for the N-th restart.
start_node() {  # index [namespace [run arguments...]]
    local i=$1 err="$work/err$1" fd args=()
    if [ $# -ge 2 ]; then
        nodens[$i]=$2
        nodeargs[$i]=$(printf '%s\n' "${@:3}")
    fi
    [ -z "${nodeargs[$i]}" ] || mapfile -t args <<< "${nodeargs[$i]}"
    [ ! -e "$err" ] || err="$work/err$1.$(ls "$work" | grep -c "^err$1\(\.\|\$\)")"
    # Background processes start through `ip netns exec` itself (not the shell function), so that $! is their PID.
    ip netns exec "${nodens[$i]}" "$binary" run --data "$work/node$i" "${args[@]}" \
        < "$work/in$i" >> "$work/out$i" 2> "$err" &
    nodepid[$i]=$!
    pids+=($!)
    running+=("$i")
    if [ -z "$(eval "echo \${fd$i:-}")" ]; then
        exec {fd}> "$work/in$i"
        eval "fd$i=$fd"
    fi
}

stop_node() {  # index: SIGTERM (a graceful stop), bounded, then SIGKILL
    local i=$1 pid=${nodepid[$1]} waited=0
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    running=($(for r in "${running[@]}"; do [ "$r" = "$i" ] || echo "$r"; done))
}

send() { local fd; eval "fd=\$fd$1"; echo "$2" >&"$fd"; }

wait_for() {  # node, text, seconds
    local deadline=$((SECONDS + $3))
    until grep -qF -- "$2" "$work/out$1"; do
        [ $SECONDS -lt $deadline ] || { echo "timeout: node$1 never printed '$2'"; tail -5 "$work/err$1"*; return 1; }
        sleep 0.2
    done
}

# The digest lines of a node's latest /digest: `log <hex>`, then `conversation <id> <hex>` per membership.
latest_digest() {
    awk '/^log /{block=""} /^(log|conversation) /{block=block $0 "\n"} END{printf "%s", block}' "$work/out$1"
}

# Whether nodes agree: one log digest among all of them, one digest per conversation among the nodes that print
# it, and `expected` conversation lines in all (members × conversations, so a half-printed /digest does not pass).
agree() {  # expected, nodes...
    local expected=$1; shift
    local all convs
    all=$(for i in "$@"; do latest_digest "$i"; done)
    [ "$(echo "$all" | grep -c '^log ' || true)" -eq $# ] || return 1
    [ "$(echo "$all" | grep '^log ' | sort -u | wc -l)" -eq 1 ] || return 1
    convs=$(echo "$all" | grep '^conversation ' || true)
    [ "$(echo "$convs" | grep -c . || true)" -eq "$expected" ] || return 1
    [ "$(echo "$convs" | sort -u | wc -l)" -eq "$(echo "$convs" | awk '{print $2}' | sort -u | wc -l)" ]
}

converge() {  # seconds, expected conversation lines, nodes...: asks for digests until they agree
    local deadline=$((SECONDS + $1)) expected=$2; shift 2
    while [ $SECONDS -lt $deadline ]; do
        for i in "$@"; do send "$i" "/digest"; done
        sleep 0.5
        if agree "$expected" "$@"; then return 0; fi
    done
    return 1
}

show_digests() {
    for i in "$@"; do echo "node$i: $(latest_digest "$i" | tr '\n' ' ')"; done
}

fail() {  # message, nodes to show
    local message=$1; shift
    echo "$script: FAILED: $message"
    show_digests "$@"
    for i in "$@"; do
        echo "--- node$i: last lines of its output and errors"
        tail -3 "$work/out$i"; tail -5 "$work/err$i"*
    done
    echo "0 passed, 1 failed"
    exit 1
}

# Whether any node logged a ban: loss, partitions and restarts are the network's doing, never a peer's fault.
check_no_bans() {
    if grep -l "^notice: banned" "$work"/err* >/dev/null 2>&1; then
        echo "an honest node was banned ($(grep -h "^notice: banned" "$work"/err* | head -1));"
    fi
}

# The last lines of a run: passed, or FAILED with the problems found (then the exit status is 1).
report() {  # problems ("" when none)
    if [ -z "$1" ]; then
        echo "$script: passed"
        echo "1 passed, 0 failed"
    else
        echo "$script: FAILED:$1"
        echo "0 passed, 1 failed"
        exit 1
    fi
}
