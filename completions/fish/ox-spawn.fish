# fish completion for ox-spawn(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

# __ox_spawn_after_dashdash is true once -- is on the command line: what
# follows is a command and its arguments.
function __ox_spawn_after_dashdash
    contains -- -- (commandline -opc)
end

# __ox_spawn_command completes the command after --, and its arguments, as
# fish would complete them on a command line of their own.
function __ox_spawn_command
    set -l tokens (commandline -opc)
    set -l i (contains -i -- -- $tokens)
    set -e tokens[1..$i]
    complete -C (string join ' ' -- (string escape -- $tokens) (commandline -ct))
end

complete -c ox-spawn -f
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s d -l detach -d 'print the run record and return'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s m -l model -x -d 'the model of an LLM run'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s e -l env -x -a '(set -n | string replace -r \'$\' =)' -d 'add NAME=VALUE to the run environment'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s n -l no-stdin -d 'do not read stdin'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s p -l priority -x -d 'the place in the admission queue: higher first'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s a -l agent -x -a '(__ox_agent_names)' -d 'act on agent NAME'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l json -d 'print JSON lines even on a terminal'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s h -l help -d 'show help'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s v -l version -d 'print the version'
complete -c ox-spawn -n '__ox_spawn_after_dashdash' -x -a '(__ox_spawn_command)'
