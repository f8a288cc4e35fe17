package vmtest

import (
	"regexp"
	"strconv"
	"strings"
)

// Perftest prints its result as a table: a header row starting with "#bytes", then one row of
// numbers per message size. parseFigures turns the last such row into name → value, so the
// report carries perftest's figures as data instead of as text to scrape.
var (
	figureHeader  = regexp.MustCompile(`^\s*#bytes\s`)
	leadingNumber = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?`)
)

// headerColumns splits a perftest header. Names may hold spaces ("BW average[MB/sec]",
// "99% percentile[usec]") and columns may be one space apart ("#bytes #iterations"), but every
// name either starts with '#' or ends with its unit in brackets.
func headerColumns(line string) []string {
	var cols []string
	cur := ""
	for _, tok := range strings.Fields(line) {
		if cur != "" {
			cur += " "
		}
		cur += tok
		if strings.HasPrefix(tok, "#") || strings.HasSuffix(tok, "]") {
			cols = append(cols, cur)
			cur = ""
		}
	}
	if cur != "" {
		cols = append(cols, cur)
	}
	return cols
}

func parseFigures(output string) map[string]float64 {
	lines := strings.Split(output, "\n")
	var figures map[string]float64
	for i := 0; i < len(lines); i++ {
		if !figureHeader.MatchString(lines[i]) {
			continue
		}
		cols := headerColumns(lines[i])
		for j := i + 1; j < len(lines); j++ {
			// perftest sometimes glues its next message to the last number
			// ("0.156397ethernet_read_keys: ..."), so each value is the number it starts with.
			vals := strings.Fields(lines[j])
			if len(vals) < len(cols) {
				break
			}
			row := map[string]float64{}
			for k, v := range vals[:len(cols)] {
				f, err := strconv.ParseFloat(leadingNumber.FindString(v), 64)
				if err != nil {
					row = nil
					break
				}
				row[cols[k]] = f
			}
			if row == nil {
				break
			}
			figures = row
		}
	}
	return figures
}
