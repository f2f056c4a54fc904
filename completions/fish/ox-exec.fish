# fish completion for ox-exec(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

# __ox_exec_after_dashdash is true once -- is on the command line: what
# follows is a command and its arguments (the agent's policy decides what
# may run).
function __ox_exec_after_dashdash
    contains -- -- (commandline -opc)
end

# __ox_exec_command completes the command after --, and its arguments, as
# fish would complete them on a command line of their own.
function __ox_exec_command
    set -l tokens (commandline -opc)
    set -l i (contains -i -- -- $tokens)
    set -e tokens[1..$i]
    complete -C (string join ' ' -- (string escape -- $tokens) (commandline -ct))
end

complete -c ox-exec -f
complete -c ox-exec -n 'not __ox_exec_after_dashdash' -s c -l command -x -d 'a command LINE (a shell only if the policy allows)'
complete -c ox-exec -n 'not __ox_exec_after_dashdash' -l timeout -x -d 'kill the command after D'
complete -c ox-exec -n 'not __ox_exec_after_dashdash' -l wasm -x -a 'jsonq textstat' -d 'run the WASM tool TOOL with the args'
complete -c ox-exec -n 'not __ox_exec_after_dashdash' -s a -l agent -x -a '(__ox_agent_names)' -d 'act on agent NAME'
complete -c ox-exec -n 'not __ox_exec_after_dashdash' -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-exec -n 'not __ox_exec_after_dashdash' -l json -d 'print the exec or tool record instead of the output'
complete -c ox-exec -n 'not __ox_exec_after_dashdash' -s h -l help -d 'show help'
complete -c ox-exec -n 'not __ox_exec_after_dashdash' -s v -l version -d 'print the version'
complete -c ox-exec -n '__ox_exec_after_dashdash' -x -a '(__ox_exec_command)'
