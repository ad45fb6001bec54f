# Boot check only: init.sh already recorded PCI devices and ibv_devinfo.
exit 0
