"""The family contract (torch-free): what a family is (`Family`), its builder's protocol, its files
and sources, the handles and settings its nodes pass, and how families are found and registered.
It sits below the engine and the families' own packages: both import it, it imports neither."""
