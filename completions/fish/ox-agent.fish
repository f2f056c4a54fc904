# fish completion for ox-agent(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

complete -c ox-agent -f
complete -c ox-agent -l url -x -a 'https://api.openai.com/v1 http://localhost:11434/v1 http://localhost:8080/v1' -d 'the endpoint base URL (.../v1)'
complete -c ox-agent -s m -l model -x -d 'the model to ask'
complete -c ox-agent -l run -x -d 'the run ID (set by oxiosd)'
complete -c ox-agent -s s -l system -x -d 'a system prompt for the run'
complete -c ox-agent -s P -l persona -x -a 'default ops reviewer terse' -d 'the persona NAME'
complete -c ox-agent -l personas -d 'list the personas the agent may use'
complete -c ox-agent -s c -l continue -d 'continue the latest conversation'
complete -c ox-agent -l conversation -x -d 'continue the conversation of run ID'
complete -c ox-agent -l no-keep -d 'do not keep the conversation'
complete -c ox-agent -l no-recall -d 'recall no memories at the start'
complete -c ox-agent -l no-summary -d 'remember no summary at the end'
complete -c ox-agent -l no-memory -d '--no-recall and --no-summary'
complete -c ox-agent -s t -l temperature -x -d 'the sampling temperature (0 to 2)'
complete -c ox-agent -l max-tokens -x -d 'cap each answer at N tokens'
complete -c ox-agent -l max-turns -x -d 'end the run as failed after N model calls'
complete -c ox-agent -l timeout -x -a '30s 1m 2m 5m 10m 30m' -d 'give up on one model call, its whole answer, after D'
complete -c ox-agent -l first-token-timeout -x -a '30s 1m 2m 5m' -d 'give up on an attempt that sends no token for D'
complete -c ox-agent -s q -l quiet -d 'on a terminal, show only the answers'
complete -c ox-agent -l verbose -d 'show system prompts and memories; delta records off a terminal'
complete -c ox-agent -l retries -x -d 'try a failed model call N more times'
complete -c ox-agent -s a -l agent -x -a '(__ox_agent_names)' -d 'act on agent NAME'
complete -c ox-agent -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-agent -l json -d 'print JSON lines even on a terminal'
complete -c ox-agent -s h -l help -d 'show help'
complete -c ox-agent -s v -l version -d 'print the version'
