"""purerl's Hydra configs, shipped inside the wheel as the package `purerl.conf`."""
