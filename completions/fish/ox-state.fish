# fish completion for ox-state(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

set -l __ox_state_cmds save load rm ls

# __ox_state_keys prints the keys of the agent named on the command line (or
# in OXIOS_AGENT), asking the daemon; nothing when it is not running.
function __ox_state_keys
    set -l tokens (commandline -opc)
    set -l agent $OXIOS_AGENT
    set -l sock
    set -l i 2
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case -a --agent
                set i (math $i + 1)
                set agent $tokens[$i]
            case '--agent=*'
                set agent (string replace -- --agent= '' $tokens[$i])
            case --socket
                set i (math $i + 1)
                set sock --socket $tokens[$i]
            case '--socket=*'
                set sock --socket (string replace -- --socket= '' $tokens[$i])
        end
        set i (math $i + 1)
    end
    test -n "$agent"; or return
    timeout 2 $tokens[1] ls -a $agent $sock --json 2>/dev/null | string replace -rf '.*"key":"((?:[^"\\\\]|\\\\.)*)".*' '$1' | string replace -a '\\"' '"'
end

complete -c ox-state -f
complete -c ox-state -n "not __fish_seen_subcommand_from $__ox_state_cmds" -s h -l help -d 'Show help'
complete -c ox-state -n "not __fish_seen_subcommand_from $__ox_state_cmds" -s v -l version -d 'Print the version'
complete -c ox-state -n "not __fish_seen_subcommand_from $__ox_state_cmds" -a save -d 'Save VALUE (or stdin) under KEY'
complete -c ox-state -n "not __fish_seen_subcommand_from $__ox_state_cmds" -a load -d 'Write the value of KEY to stdout'
complete -c ox-state -n "not __fish_seen_subcommand_from $__ox_state_cmds" -a rm -d 'Delete keys'
complete -c ox-state -n "not __fish_seen_subcommand_from $__ox_state_cmds" -a ls -d 'List keys at or below PREFIX'

complete -c ox-state -n "__fish_seen_subcommand_from $__ox_state_cmds" -s a -l agent -x -a '(__ox_agent_names)' -d 'Act on agent NAME'
complete -c ox-state -n "__fish_seen_subcommand_from $__ox_state_cmds" -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-state -n "__fish_seen_subcommand_from $__ox_state_cmds" -l json -d 'Print JSON lines even on a terminal'
complete -c ox-state -n "__fish_seen_subcommand_from $__ox_state_cmds" -s h -l help -d 'Show help'
complete -c ox-state -n "__fish_seen_subcommand_from $__ox_state_cmds" -a '(__ox_state_keys)' -d 'Key'
