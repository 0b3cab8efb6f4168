package storage

// SpareTarget is how many spare files a local root keeps ready.
const SpareTarget = spareTarget
