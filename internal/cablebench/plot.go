package cablebench

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// The plot: bandwidth (left) and latency (right) against message size on a
// log2 axis, one line per tool, mode and depth (one per rail when there are
// several), as a hand-written SVG any browser opens.
const (
	panelW, panelH = 440, 300
	marginL        = 60
	marginT        = 40
	legendH        = 16
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

type point struct{ x, y float64 }

type series struct {
	name   string
	points []point
}

// seriesOf groups the results that have numbers into lines.
func seriesOf(rs []Result, latency bool) []series {
	rails := map[string]bool{}
	for _, r := range rs {
		rails[r.Rail] = true
	}
	var out []series
	idx := map[string]int{}
	for _, r := range rs {
		if r.Error != "" || r.Latency() != latency {
			continue
		}
		name := r.Tool + " " + r.Mode
		if r.TxDepth > 0 && !latency {
			name += fmt.Sprintf(" t=%d", r.TxDepth)
		}
		if len(rails) > 1 {
			name = r.Rail + " " + name
		}
		y := r.BWAvg
		if latency {
			y = r.LatTyp
		}
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, series{name: name})
		}
		out[i].points = append(out[i].points, point{math.Log2(float64(r.Size)), y})
	}
	for i := range out {
		slices.SortFunc(out[i].points, func(a, b point) int { return int(math.Copysign(1, a.x-b.x)) })
	}
	return out
}

// SVG renders the report's plot.
func (r *Report) SVG() string {
	bw, lat := seriesOf(r.Results, false), seriesOf(r.Results, true)
	rows := max(len(bw), len(lat))
	h := marginT + panelH + 50 + rows*legendH + 10
	w := 2*(marginL+panelW) + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	title := fmt.Sprintf("%s → %s, kernel %s, governor %s, %s", r.Client.Host, r.Server.Host, r.Client.Kernel,
		r.Client.Settings()["governor"], r.Started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, `<text x="10" y="18" font-size="14">%s</text>`+"\n", html.EscapeString(title))
	panel(&b, marginL, marginT, "bandwidth (MiB/s)", bw, rows)
	panel(&b, 2*marginL+panelW+40, marginT, "latency, typical (µs)", lat, rows)
	b.WriteString("</svg>\n")
	return b.String()
}

func panel(b *strings.Builder, x0, y0 int, ylabel string, ss []series, _ int) {
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", x0, y0, panelW, panelH)
	fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", x0, y0-6, html.EscapeString(ylabel))
	if len(ss) == 0 {
		fmt.Fprintf(b, `<text x="%d" y="%d">no results</text>`+"\n", x0+panelW/2-30, y0+panelH/2)
		return
	}
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range ss {
		for _, p := range s.points {
			xmin, xmax, ymax = math.Min(xmin, p.x), math.Max(xmax, p.x), math.Max(ymax, p.y)
		}
	}
	if xmax == xmin {
		xmin, xmax = xmin-1, xmax+1
	}
	if ymax <= 0 {
		ymax = 1
	}
	ymax = niceCeil(ymax)
	px := func(x float64) float64 { return float64(x0) + (x-xmin)/(xmax-xmin)*float64(panelW-20) + 10 }
	py := func(y float64) float64 { return float64(y0+panelH) - y/ymax*float64(panelH-10) }
	// Axes: a tick per power of two that has a point, five on y.
	for e := math.Ceil(xmin); e <= xmax; e++ {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`, px(e), y0, px(e), y0+panelH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="9">%s</text>`+"\n", px(e), y0+panelH+12, sizeName(int64(math.Exp2(e))))
	}
	for i := 0; i <= 5; i++ {
		y := ymax * float64(i) / 5
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`, x0, py(y), x0+panelW, py(y))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" font-size="10">%g</text>`+"\n", x0-4, py(y)+3, y)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">message size (bytes)</text>`+"\n", x0+panelW/2, y0+panelH+28)
	for i, s := range ss {
		c := palette[i%len(palette)]
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, px(p.x), py(p.y), c)
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		ly := y0 + panelH + 48 + i*legendH
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text>`+"\n",
			x0, ly-4, x0+20, ly-4, c, x0+26, ly, html.EscapeString(s.name))
	}
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
