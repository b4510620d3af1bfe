package task

// pidsWithDetails: on Windows, Pids carries runhcs's ProcessDetails, which
// containerd's and ctr's Windows builds decode (`ctr tasks ps`).
var pidsWithDetails = true
