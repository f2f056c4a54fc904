# fish completion for ox-remember(1)

complete -c ox-remember -f
complete -c ox-remember -s k -l kind -r -a 'working episodic semantic' -d 'kind of memory'
complete -c ox-remember -s t -l tag -r -d 'add a tag'
complete -c ox-remember -l ttl -r -d 'forget after DURATION'
complete -c ox-remember -l importance -r -d 'importance from 0 to 1'
complete -c ox-remember -l source -r -d 'where the memory comes from'
complete -c ox-remember -l batch -r -d 'memories per request'
complete -c ox-remember -s a -l agent -r -d 'act on agent NAME'
complete -c ox-remember -l socket -r -F -d 'oxiosd socket PATH'
complete -c ox-remember -l json -d 'print JSON lines even on a terminal'
complete -c ox-remember -s h -l help -d 'show help'
complete -c ox-remember -s v -l version -d 'print the version'
