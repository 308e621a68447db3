package readmodel

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"regexp"
	"strings"
	"time"
)

// barChart draws one series as a small inline SVG bar chart (the activity table's sparkline).
// The chart is an image with a text alternative (role="img", aria-label and <title> with the
// total and the peak); the same totals are in the table beside it, so nothing is told by colour
// or shape alone. Colours come from the stylesheet (light and dark theme).
func barChart(label string, vals []float64, unit string) template.HTML {
	const w, h = 240.0, 44.0
	peak, total := 0.0, 0.0
	for _, v := range vals {
		total += v
		peak = math.Max(peak, v)
	}
	alt := fmt.Sprintf("%s per minute over the last hour: peak %s%s", label, trimNum(peak), unit)
	if unit == "" {
		alt = fmt.Sprintf("%s per minute over the last hour: total %s, peak %s", label, trimNum(total), trimNum(peak))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart spark" role="img" aria-label="%s" width="%d" height="%d" viewBox="0 0 %d %d"><title>%s</title>`,
		html.EscapeString(alt), int(w), int(h), int(w), int(h), html.EscapeString(alt))
	fmt.Fprintf(&b, `<rect class="frame" x="0.5" y="0.5" width="%d" height="%d"/>`, int(w)-1, int(h)-1)
	if n := len(vals); n > 0 && peak > 0 {
		bw := w / float64(n)
		for i, v := range vals {
			if v <= 0 {
				continue
			}
			bh := math.Max(2, (h-4)*v/peak)
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, float64(i)*bw, h-bh, math.Max(bw-0.8, 1.5), bh)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: only numbers and escaped text
}

// rateChart draws a per-minute series of the last hour as a full-size SVG bar chart with a y axis
// (0, half and the peak), gridlines and a time axis (60 minutes ago, 30, now). The text
// alternative names the total and the peak; bad marks a failure series (a second colour, and the
// caption says it in words).
func rateChart(label string, vals []int64, bad bool) template.HTML {
	const w, h, left, bottom, top = 600.0, 150.0, 38.0, 18.0, 8.0
	peak, total := int64(0), int64(0)
	for _, v := range vals {
		total += v
		if v > peak {
			peak = v
		}
	}
	alt := fmt.Sprintf("%s per minute over the last hour: total %d, peak %d", label, total, peak)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" aria-label="%s" viewBox="0 0 %d %d" preserveAspectRatio="xMidYMid meet"><title>%s</title>`,
		html.EscapeString(alt), int(w), int(h), html.EscapeString(alt))
	plotW, plotH := w-left-4, h-bottom-top
	scale := float64(peak)
	if scale < 1 {
		scale = 1
	}
	// gridlines and y labels: 0, half, peak (integers; a peak of 1 has no half line)
	ticks := []int64{0, peak}
	if peak >= 2 {
		ticks = []int64{0, peak / 2, peak}
	}
	for _, t := range ticks {
		y := top + plotH - plotH*float64(t)/scale
		fmt.Fprintf(&b, `<line class="grid" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f"/>`, left, w-4, y, y)
		fmt.Fprintf(&b, `<text class="axis" x="%.0f" y="%.1f" text-anchor="end">%d</text>`, left-5, y+3.5, t)
	}
	if n := len(vals); n > 0 {
		bw := plotW / float64(n)
		cls := "bar"
		if bad {
			cls = "bar bad"
		}
		for i, v := range vals {
			if v <= 0 {
				continue
			}
			bh := math.Max(2, plotH*float64(v)/scale)
			fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, cls, left+float64(i)*bw+0.4, top+plotH-bh, math.Max(bw-0.8, 1.5), bh)
		}
	}
	for _, x := range []struct {
		at     float64
		anchor string
		text   string
	}{{left, "start", "60 min ago"}, {left + plotW/2, "middle", "30 min ago"}, {w - 4, "end", "now"}} {
		fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%.0f" text-anchor="%s">%s</text>`, x.at, h-4, x.anchor, x.text)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: only numbers and escaped text
}

func trimNum(f float64) string {
	if f == math.Trunc(f) {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.1f", f)
}

func ints(v []int64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func ageText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

var badgeClass = regexp.MustCompile(`[^a-z0-9_]`)

// badge renders a state as text with a shape (the stylesheet puts a glyph per state in front:
// never colour alone).
func badge(state string) template.HTML {
	cls := badgeClass.ReplaceAllString(strings.ToLower(state), "_")
	return template.HTML(`<span class="badge badge-` + cls + `">` + html.EscapeString(state) + `</span>`) // #nosec: escaped
}

// shellQuote quotes s for a POSIX shell (the console's copyable command lines).
func shellQuote(s string) string {
	if s != "" && regexp.MustCompile(`^[A-Za-z0-9._:/@=+-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var consoleTemplates = template.Must(template.New("console").Funcs(template.FuncMap{
	"t":     fmtTime,
	"s":     deref,
	"count": countText,
	"age":   ageText,
	"bars":  func(label string, v []int64) template.HTML { return barChart(label, ints(v), "") },
	"lag":   func(v []float64) template.HTML { return barChart("largest ack lag", v, " s") },
	"rate":  rateChart,
	"badge": badge,
	"sh":    shellQuote,
	"secs":  func(f float64) string { return trimNum(f) + " s" },
	"since": func(t *time.Time, now time.Time) string {
		if t == nil {
			return "-"
		}
		return ageText(now.Sub(*t))
	},
	"q": func(s string) string { return template.URLQueryEscaper(s) },
	"capped": func(n int64) string {
		if n > CountCap {
			return fmt.Sprintf("%d+", CountCap)
		}
		return fmt.Sprint(n)
	},
	"pmax": func(a, b int64) int64 {
		if a+b < 1 {
			return 1
		}
		return a + b
	},
	"int64": func(n int) int64 { return int64(n) },
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
}).Parse(consoleHTML))
