from steerable_maint.cli import main

main()
