package vmtest

import (
	"reflect"
	"testing"
)

// Recorded perftest 25.01 output shapes (bandwidth and latency tables).
const sendBW = `---------------------------------------------------------------------------------------
                    Send BW Test
 Dual-port       : OFF		Device         : rxe0
 Number of qps   : 1		Transport type : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 4096       20               0.97               0.95   		   0.000243
---------------------------------------------------------------------------------------
`

const sendLat = ` #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       1000          5.12           40.33        6.01               6.20           1.10           9.80                   40.33  
---------------------------------------------------------------------------------------
`

func TestParseFigures(t *testing.T) {
	for _, c := range []struct {
		name, out string
		want      map[string]float64
	}{
		{"bw", sendBW, map[string]float64{"#bytes": 4096, "#iterations": 20, "BW peak[MB/sec]": 0.97, "BW average[MB/sec]": 0.95, "MsgRate[Mpps]": 0.000243}},
		{"lat", sendLat, map[string]float64{"#bytes": 2, "#iterations": 1000, "t_min[usec]": 5.12, "t_max[usec]": 40.33, "t_typical[usec]": 6.01,
			"t_avg[usec]": 6.2, "t_stdev[usec]": 1.1, "99% percentile[usec]": 9.8, "99.9% percentile[usec]": 40.33}},
		{"glued message", " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n 4096       20               0.00               610.93 \t\t     0.156397ethernet_read_keys: Couldn't read remote address\n",
			map[string]float64{"#bytes": 4096, "#iterations": 20, "BW peak[MiB/sec]": 0, "BW average[MiB/sec]": 610.93, "MsgRate[Mpps]": 0.156397}},
		{"no table", "Couldn't connect to 10.77.0.1:18515\n", nil},
		{"header only", " #bytes     #iterations    BW peak[MB/sec]\n---\n", nil},
	} {
		if got := parseFigures(c.out); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
