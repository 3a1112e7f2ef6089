package gpu

// ArenaChunkMin is the size of the first buffer small weights share.
const ArenaChunkMin = arenaChunkMin
