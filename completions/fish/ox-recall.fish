# fish completion for ox-recall(1)

complete -c ox-recall -f
complete -c ox-recall -s k -l k -r -d 'at most N memories'
complete -c ox-recall -l kind -r -a 'working episodic semantic' -d 'only memories of KIND'
complete -c ox-recall -s t -l tag -r -d 'only memories with TAG'
complete -c ox-recall -l since -r -d 'only memories created since TIME'
complete -c ox-recall -l min-score -r -d 'only memories scoring at least S'
complete -c ox-recall -l all-agents -d 'search every agent (admin)'
complete -c ox-recall -s a -l agent -r -d 'act on agent NAME'
complete -c ox-recall -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-recall -l json -d 'print JSON lines even on a terminal'
complete -c ox-recall -s h -l help -d 'show help'
complete -c ox-recall -s v -l version -d 'print the version'
