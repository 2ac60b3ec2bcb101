from tempi.cli.entry import main

main()
