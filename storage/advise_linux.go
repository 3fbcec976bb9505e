package storage

import "syscall"

// mapPopulate makes mapFile's read-only mapping of a file about to be
// walked page by page populated in one call (read ahead and mapped at
// once) instead of faulting its pages in one by one: most of a warm walk's
// time was the faults.
const mapPopulate = syscall.MAP_POPULATE
