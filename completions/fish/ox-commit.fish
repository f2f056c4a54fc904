# fish completion for ox-commit(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

set -l __ox_commit_cmds log show diff tag push restore

# __ox_commit_revs prints HEAD and the commits and tags that `ox-commit log`
# lists for the agent named on the command line (or in OXIOS_AGENT), asking
# the daemon; only HEAD when it is not running.
function __ox_commit_revs
    set -l tokens (commandline -opc)
    set -l args
    set -l i 2
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case -a --agent --socket
                set -l opt $tokens[$i]
                set i (math $i + 1)
                set -a args $opt $tokens[$i]
            case '--agent=*' '--socket=*'
                set -a args $tokens[$i]
        end
        set i (math $i + 1)
    end
    set -l log (timeout 2 $tokens[1] log $args --json 2>/dev/null)
    echo HEAD
    string replace -rf '.*"commit":"([0-9a-f]+)".*' '$1' -- $log
    string replace -rf '.*"tags":\[([^\]]*)\].*' '$1' -- $log | string split , | string trim -c '"'
end

# __ox_commit_want_rev succeeds when the next argument of the subcommand is
# a REV: log, show and restore take one, diff two, tag a NAME and then one.
function __ox_commit_want_rev
    set -l tokens (commandline -opc)
    set -l cmd
    set -l n 0
    set -l skip 0
    for t in $tokens[2..-1]
        if test $skip = 1
            set skip 0
            continue
        end
        switch $t
            case -a --agent -n --socket -m --message --tag
                set skip 1
            case '-*'
            case '*'
                if test -z "$cmd"
                    set cmd $t
                else
                    set n (math $n + 1)
                end
        end
    end
    switch "$cmd"
        case log show restore
            test $n -lt 1
        case diff
            test $n -lt 2
        case tag
            test $n -eq 1
        case '*'
            return 1
    end
end

complete -c ox-commit -f
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -s h -l help -d 'Show help'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -s v -l version -d 'Print the version'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -s a -l agent -x -a '(__ox_agent_names)' -d 'Commit only agent NAME (default: every agent)'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -s m -l message -x -d 'Commit message MSG'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -l tag -x -d 'Also tag the commit NAME'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -s q -l quiet -d 'Print nothing on success'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -l json -d 'Print JSON lines even on a terminal'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -a log -d 'List the commits, newest first'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -a show -d 'Print one commit and the paths it changed'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -a diff -d 'List the paths that differ from REV to REV2'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -a tag -d 'Tag commit REV (default HEAD) as NAME'
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -a push -d "Push every agent's history to a git remote (a backup)"
complete -c ox-commit -n "not __fish_seen_subcommand_from $__ox_commit_cmds" -a restore -d "Make the agent's state equal to REV's"

complete -c ox-commit -n "__fish_seen_subcommand_from $__ox_commit_cmds" -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-commit -n "__fish_seen_subcommand_from $__ox_commit_cmds" -l json -d 'Print JSON lines even on a terminal'
complete -c ox-commit -n "__fish_seen_subcommand_from $__ox_commit_cmds" -s h -l help -d 'Show help'
complete -c ox-commit -n "__fish_seen_subcommand_from log show diff" -s a -l agent -x -a '(__ox_agent_names)' -d 'Only agent NAME (default: every agent)'
complete -c ox-commit -n "__fish_seen_subcommand_from restore" -s a -l agent -x -a '(__ox_agent_names)' -d 'Act on agent NAME'
complete -c ox-commit -n "__fish_seen_subcommand_from log" -s n -x -d 'At most N commits'
complete -c ox-commit -n "__fish_seen_subcommand_from diff" -s p -l patch -d 'Print a unified diff'
complete -c ox-commit -n __ox_commit_want_rev -a '(__ox_commit_revs)' -d 'Revision'
