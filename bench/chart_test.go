package bench

// The report's chart (<mode>.png): throughput and CPU-s/GB per row as two
// horizontal bar charts side by side, rows in the report's order, and the
// lag percentiles below them. Drawn with the standard library and the
// 7x13 bitmap font of golang.org/x/image, so the same report gives the
// same bytes (no font hinting, no map order, no time).
//
//	+--------------------------------------------------------------+
//	| title: mode, machine, date                                   |
//	| Throughput, MB/s             | CPU-s per GB                  |
//	|     label |#######  812      |     label |##  1.2            |
//	|     label |####|  430        |     label |#####  3.4         |
//	| Lag, ms                                                      |
//	|     variant  p50 |#  0.8                                     |
//	|              p99 |###  4.1                                   |
//	|              max |######  9.0                                |
//	+--------------------------------------------------------------+

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"strconv"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

const (
	chartWidth     = 1400
	chartHeightMin = 900 // grows when the rows need more
	chartMargin    = 20
	chartGap       = 40 // between the two panels, and above the lag panel
	titleHeight    = 30
	panelHeader    = 32 // panel title above the bars
	axisHeight     = 24 // tick labels below the bars
	labelWidth     = 300
	valueWidth     = 90 // room right of the longest bar for its value
	rowPitchMin    = 22 // throughput and CPU rows; grows to rowPitchMax when there is room
	rowPitchMax    = 34
	lagPitchMin    = 14 // one percentile bar
	lagPitchMax    = 22
	lagGroupGap    = 8
	lagEmptyHeight = 60 // the lag panel's title and "no lag measured"
	axisTicks      = 5
	labelRunesMax  = labelWidth/7 - 2 // the font advances 7 px
	dashLength     = 4
)

var (
	chartFace       = basicfont.Face7x13
	colorBackground = color.RGBA{255, 255, 255, 255}
	colorText       = color.RGBA{20, 20, 20, 255}
	colorGrid       = color.RGBA{225, 225, 225, 255}
	colorAxis       = color.RGBA{120, 120, 120, 255}
	colorWhisker    = color.RGBA{0, 0, 0, 255}
	colorMarker     = color.RGBA{200, 30, 30, 255}
	colorOther      = color.RGBA{150, 150, 150, 255}
	// scenarioColors keeps a scenario's colour the same in both panels and
	// from run to run; mirrord is the strong blue.
	scenarioColors = map[string]color.RGBA{
		scenarioLimit:        {110, 110, 110, 255},
		scenarioMirrord:      {31, 100, 200, 255},
		"mirrord-from-kafka": {110, 160, 230, 255},
		scenarioCopier:       {240, 140, 30, 255},
		scenarioMM2:          {210, 60, 50, 255},
		"kafka-replication":  {140, 90, 180, 255},
		scenarioServeMirrord: {30, 150, 140, 255},
		scenarioServeKafka:   {150, 100, 60, 255},
	}
	lagColors = [3]color.RGBA{{150, 210, 150, 255}, {50, 160, 70, 255}, {20, 90, 40, 255}}
)

// chartBar is one horizontal bar: value with a whisker low..high (equal to
// value when there is no spread); a bar that was not measured shows "-".
type chartBar struct {
	label            string
	value, low, high float64
	measured         bool
	color            color.RGBA
	gapAfter         int // extra pixels below it (between lag groups)
}

// chartMarker is a dashed vertical line at a value: the limit, a goal.
type chartMarker struct {
	value float64
	label string
}

// renderChart is the PNG of the report.
func renderChart(r Report, rows []row) ([]byte, error) {
	img := chartImage(r, rows)
	var out bytes.Buffer
	if err := png.Encode(&out, img); err != nil {
		return nil, fmt.Errorf("bench: report: png: %w", err)
	}
	return out.Bytes(), nil
}

// chartLayout is where the panels go: the row pitches grow to fill the
// minimum height, and the height grows past it when the rows need more.
type chartLayout struct {
	rowPitch, lagPitch   int
	topHeight, lagHeight int // panel heights, titles and axes included
	height               int
}

func layoutChart(rows, lagBars, lagGroups int) chartLayout {
	const overhead = 2*chartMargin + titleHeight + chartGap + 2*(panelHeader+axisHeight)
	rows = max(rows, 1) // room for "nothing measured"
	demand := rows*rowPitchMin + lagBars*lagPitchMin + lagGroups*lagGroupGap
	growth := max(1, float64(chartHeightMin-overhead)/float64(demand))
	l := chartLayout{
		rowPitch: min(rowPitchMax, int(float64(rowPitchMin)*growth)),
		lagPitch: min(lagPitchMax, int(float64(lagPitchMin)*growth)),
	}
	l.topHeight = panelHeader + rows*l.rowPitch + axisHeight
	l.lagHeight = panelHeader + lagBars*l.lagPitch + lagGroups*lagGroupGap + axisHeight
	if lagBars == 0 {
		l.lagHeight = lagEmptyHeight
	}
	l.height = max(chartHeightMin, overhead-2*(panelHeader+axisHeight)+l.topHeight+l.lagHeight)
	return l
}

// chartImage draws the title, the two row panels and the lag panel.
func chartImage(r Report, rows []row) *image.RGBA {
	throughput, cost := rowBars(rows)
	lags := lagBars(r.Lags)
	layout := layoutChart(len(rows), len(lags), len(r.Lags))
	img := image.NewRGBA(image.Rect(0, 0, chartWidth, layout.height))
	draw.Draw(img, img.Bounds(), image.NewUniform(colorBackground), image.Point{}, draw.Src)

	title := fmt.Sprintf("mirrord bench: %s - %s - %s", r.Mode, r.Machine, r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	drawBold(img, chartMargin, chartMargin+13, title)

	top := chartMargin + titleHeight
	panelWidth := (chartWidth - 2*chartMargin - chartGap) / 2
	left := image.Rect(chartMargin, top, chartMargin+panelWidth, top+layout.topHeight)
	right := left.Add(image.Pt(panelWidth+chartGap, 0))
	thickness := layout.rowPitch * 2 / 3
	drawBarChart(img, left, "Throughput, MB/s (median; whisker min-max)", throughput, layout.rowPitch, thickness, limitMarker(rows))
	drawBarChart(img, right, "CPU-s per GB (median; whisker min-max; lower is better)", cost, layout.rowPitch, thickness, nil)

	lagTop := top + layout.topHeight + chartGap
	lagArea := image.Rect(chartMargin, lagTop, chartWidth-chartMargin, lagTop+layout.lagHeight)
	lagTitle := "Lag, ms: p50, p99, max per lag run (source ack to visible on the mirror)"
	if len(lags) == 0 {
		drawBold(img, lagArea.Min.X, lagArea.Min.Y+13, lagTitle)
		drawText(img, lagArea.Min.X, lagArea.Min.Y+panelHeader+13, "no lag measured", colorText)
		return img
	}
	drawBarChart(img, lagArea, lagTitle, lags, layout.lagPitch, layout.lagPitch*3/4, &chartMarker{value: 10, label: "goal: p99 10 ms"})
	return img
}

// rowBars are the throughput and the CPU bars of the rows, in their order.
func rowBars(rows []row) (throughput, cost []chartBar) {
	for _, r := range rows {
		c, ok := scenarioColors[r.Scenario]
		if !ok {
			c = colorOther
		}
		mbs, cpu := r.MegabytesPerSecond, r.CPUSecondsPerGigabyte
		throughput = append(throughput, chartBar{r.label(), mbs.Median, mbs.Min, mbs.Max, r.measured(), c, 0})
		cost = append(cost, chartBar{r.label(), cpu.Median, cpu.Min, cpu.Max, r.measured(), c, 0})
	}
	return throughput, cost
}

// lagBars are three bars per lag result, p50, p99 and max, the variant on
// the first.
func lagBars(lags []LagResult) []chartBar {
	var bars []chartBar
	for _, l := range lags {
		for i, p := range []struct {
			name  string
			value time.Duration
		}{{"p50", l.P50}, {"p99", l.P99}, {"max", l.Max}} {
			label := p.name
			if i == 0 {
				label = l.Variant + "  " + p.name
			}
			v := durationMilliseconds(p.value)
			bars = append(bars, chartBar{label, v, v, v, l.Count > 0, lagColors[i], 0})
		}
		bars[len(bars)-1].gapAfter = lagGroupGap
	}
	return bars
}

// limitMarker marks the loopback copy's MB/s on the throughput panel.
func limitMarker(rows []row) *chartMarker {
	limit, ok := findRow(rows, scenarioLimit, variantLimit)
	if !ok {
		return nil
	}
	return &chartMarker{value: limit.MegabytesPerSecond.Median, label: "limit"}
}

// drawBarChart draws bars in area: the title, labels right-aligned in the
// label column, bars on a linear axis from 0 with grid lines, the value
// at each bar's end, and the marker, if any.
func drawBarChart(img *image.RGBA, area image.Rectangle, title string, bars []chartBar, pitch, thickness int, mark *chartMarker) {
	drawBold(img, area.Min.X, area.Min.Y+13, title)
	plot := image.Rect(area.Min.X+labelWidth, area.Min.Y+panelHeader, area.Max.X-valueWidth, area.Max.Y-axisHeight)
	if len(bars) == 0 {
		drawText(img, plot.Min.X, plot.Min.Y+13, "nothing measured", colorText)
		return
	}
	axisMax, step := axisScale(bars, mark)
	x := func(v float64) int { return plot.Min.X + int(math.Round(v/axisMax*float64(plot.Dx()))) }
	drawAxis(img, plot, axisMax, step, x)
	y := plot.Min.Y
	for _, b := range bars {
		center := y + pitch/2
		drawBar(img, b, center, thickness, plot.Min.X, x)
		y += pitch + b.gapAfter
	}
	if mark != nil {
		drawMarker(img, plot, x(mark.value), mark.label)
	}
}

// drawBar draws one bar centred on the row's centre line.
func drawBar(img *image.RGBA, b chartBar, center, thickness, left int, x func(float64) int) {
	label := truncateLabel(b.label, labelRunesMax)
	drawText(img, left-8-textWidth(label), center+4, label, colorText)
	if !b.measured {
		drawText(img, left+4, center+4, "-", colorText)
		return
	}
	end := x(b.value)
	fillRect(img, image.Rect(left, center-thickness/2, max(end, left+1), center+thickness/2), b.color)
	valueEnd := end
	if b.high > b.low {
		low, high := x(b.low), x(b.high)
		fillRect(img, image.Rect(low, center, high+1, center+1), colorWhisker)
		fillRect(img, image.Rect(low, center-3, low+1, center+4), colorWhisker)
		fillRect(img, image.Rect(high, center-3, high+1, center+4), colorWhisker)
		valueEnd = max(end, high)
	}
	drawText(img, valueEnd+6, center+4, formatNumber(b.value), colorText)
}

// axisScale is the axis's end, a whole number of round steps covering
// every bar's whisker and the marker.
func axisScale(bars []chartBar, mark *chartMarker) (axisMax, step float64) {
	largest := 0.0
	for _, b := range bars {
		if b.measured {
			largest = max(largest, b.value, b.high)
		}
	}
	if mark != nil {
		largest = max(largest, mark.value)
	}
	step = niceStep(largest / axisTicks)
	return math.Max(step, math.Ceil(largest/step)*step), step
}

// niceStep is the smallest of 1, 2 or 5 times a power of ten that is at
// least raw: tick labels people read at a glance.
func niceStep(raw float64) float64 {
	if !(raw > 0) || math.IsInf(raw, 0) {
		return 1
	}
	magnitude := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if raw <= m*magnitude {
			return m * magnitude
		}
	}
	return 10 * magnitude
}

// drawAxis draws the grid lines and tick labels of a plot from 0 to axisMax.
func drawAxis(img *image.RGBA, plot image.Rectangle, axisMax, step float64, x func(float64) int) {
	decimals := max(0, int(-math.Floor(math.Log10(step)))) // as many as the step has: 0.2 -> 1
	// Bounded: axisMax is at most axisTicks+1 steps.
	for i := 0; i <= axisTicks*2; i++ {
		tick := float64(i) * step
		if tick > axisMax*(1+1e-9) {
			break
		}
		px := x(tick)
		fillRect(img, image.Rect(px, plot.Min.Y, px+1, plot.Max.Y), colorGrid)
		label := strconv.FormatFloat(tick, 'f', decimals, 64)
		drawText(img, px-textWidth(label)/2, plot.Max.Y+15, label, colorAxis)
	}
	fillRect(img, image.Rect(plot.Min.X, plot.Min.Y, plot.Min.X+1, plot.Max.Y), colorAxis)
	fillRect(img, image.Rect(plot.Min.X, plot.Max.Y, plot.Max.X, plot.Max.Y+1), colorAxis)
}

// drawMarker draws a dashed vertical line at px, labelled at its top.
func drawMarker(img *image.RGBA, plot image.Rectangle, px int, label string) {
	for y := plot.Min.Y; y < plot.Max.Y; y += 2 * dashLength {
		fillRect(img, image.Rect(px, y, px+1, min(y+dashLength, plot.Max.Y)), colorMarker)
	}
	x := px + 3
	if x+textWidth(label) > plot.Max.X+valueWidth { // past the panel: put it left of the line
		x = px - 3 - textWidth(label)
	}
	drawText(img, x, plot.Min.Y-3, label, colorMarker)
}

func fillRect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

// drawText draws s with its baseline at y.
func drawText(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: chartFace, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// drawBold fakes a bold title, the font having one weight.
func drawBold(img *image.RGBA, x, y int, s string) {
	drawText(img, x, y, s, colorText)
	drawText(img, x+1, y, s, colorText)
}

func textWidth(s string) int { return font.MeasureString(chartFace, s).Ceil() }

// truncateLabel shortens s to at most n runes, marking the cut.
func truncateLabel(s string, n int) string {
	runes := []rune(s)
	if len(runes) <= n {
		return s
	}
	return string(runes[:n-2]) + ".."
}
