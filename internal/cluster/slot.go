package cluster

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot returns the hash slot of key: CRC16 (XMODEM) of its hash tag,
// the bytes between its first '{' and the next '}' when there are any,
// else of the whole key, modulo Slots (the Redis Cluster specification).
// Every key of a delayq partition carries the tag {topic:p}, so the keys
// of one partition share a slot.
func Slot(key string) int {
	if i := indexByte(key, '{'); i >= 0 {
		if j := indexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}

// crcTable is the table of CRC16/XMODEM (polynomial 0x1021).
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crcTable[byte(c>>8)^s[i]]
	}
	return c
}
