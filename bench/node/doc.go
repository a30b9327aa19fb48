// Package node measures what one kvallocd pool per node gains over a pool
// per engine process, on real traffic: the Mooncake conversation trace
// replayed through real daemons over their sockets.
package node
