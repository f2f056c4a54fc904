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
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l node -x -a 'any' -d 'run on fleet node NAME, or any'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s m -l model -x -d 'the model of an LLM run'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s e -l env -x -a '(set -n | string replace -r \'$\' =)' -d 'add NAME=VALUE to the run environment'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s n -l no-stdin -d 'do not read stdin'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s p -l priority -x -d 'the place in the admission queue: higher first'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s s -l system -x -d 'an LLM run system prompt'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s P -l persona -x -a 'default ops reviewer terse' -d 'an LLM run persona'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s c -l continue -d 'continue the latest conversation'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l conversation -x -d 'continue the conversation of run ID'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s t -l temperature -x -d 'an LLM run sampling temperature (0 to 2)'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l max-tokens -x -d 'cap each answer of an LLM run at N tokens'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l no-recall -d 'recall no memories at the start'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l no-summary -d 'remember no summary at the end'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l no-memory -d '--no-recall and --no-summary'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l no-keep -d 'do not keep the conversation'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s q -l quiet -d 'on a terminal, show only output and answers'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l verbose -d 'show system prompts and memories; delta records off a terminal'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s a -l agent -x -a '(__ox_agent_names)' -d 'act on agent NAME'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -l json -d 'print JSON lines even on a terminal'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s h -l help -d 'show help'
complete -c ox-spawn -n 'not __ox_spawn_after_dashdash' -s v -l version -d 'print the version'
complete -c ox-spawn -n '__ox_spawn_after_dashdash' -x -a '(__ox_spawn_command)'
