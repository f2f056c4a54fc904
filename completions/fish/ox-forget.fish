# fish completion for ox-forget(1)

complete -c ox-forget -f
complete -c ox-forget -s t -l tag -r -d 'forget memories with TAG'
complete -c ox-forget -l before -r -d 'forget memories created before TIME'
complete -c ox-forget -s a -l agent -r -d 'act on agent NAME'
complete -c ox-forget -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-forget -l json -d 'print JSON lines even on a terminal'
complete -c ox-forget -s h -l help -d 'show help'
complete -c ox-forget -s v -l version -d 'print the version'
