# fish completion for ox-agent(1)

function __ox_agent_names
    ox-agents ls --json 2>/dev/null | string replace -rf '^.*"agent":"([^"]*)".*$' '$1'
end

complete -c ox-agent -f
complete -c ox-agent -l url -x -a 'https://api.openai.com/v1 http://localhost:11434/v1 http://localhost:8080/v1' -d 'the endpoint base URL (.../v1)'
complete -c ox-agent -s m -l model -x -d 'the model to ask'
complete -c ox-agent -l run -x -d 'the run ID (set by oxiosd)'
complete -c ox-agent -l max-turns -x -d 'end the run as failed after N model calls'
complete -c ox-agent -l timeout -x -a '30s 1m 2m 5m 10m' -d 'give up on one model call after D'
complete -c ox-agent -l retries -x -d 'try a failed model call N more times'
complete -c ox-agent -s a -l agent -x -a '(__ox_agent_names)' -d 'act on agent NAME'
complete -c ox-agent -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-agent -l json -d 'print JSON lines even on a terminal'
complete -c ox-agent -s h -l help -d 'show help'
complete -c ox-agent -s v -l version -d 'print the version'
