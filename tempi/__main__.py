from tempi.cli.main import main

main()
