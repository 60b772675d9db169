package ui

import (
	"context"
	"fmt"
	"time"
)

// The chart of the topic page: how many messages fall due in each minute
// of the next hour, as bars of an inline SVG drawn by the template from
// the numbers here (no script, no library).
const (
	chartWidth  = 720
	chartHeight = 170
	chartLeft   = 48 // room for the y labels
	chartBottom = 22 // room for the x labels
	chartTop    = 8
)

// chart is the model of the SVG.
type chart struct {
	Width, Height int
	Bars          []bar
	Ticks         []tick // x axis
	YTicks        []tick // y axis: Y is the position, Label the count
	Max           int64
	Total         int64 // due in the hour
	Overdue       int64 // due before now, still scheduled
	From          time.Time
	PlotBottom    int
	PlotLeft      int
	PlotRight     int
}

// bar is one minute.
type bar struct {
	X, Y, W, H int
	Count      int64
	Title      string
}

// tick is an axis label.
type tick struct {
	X, Y   int
	Label  string
	Anchor string // SVG text-anchor: start, middle or end
}

// readChart counts the topic's scheduled entries due in each minute of the
// next hour (delayq.Inspector.DueCounts: 61 ZCOUNTs per partition, one
// pipeline) and lays out the bars.
func (s *Server) readChart(ctx context.Context, topic string, now time.Time) (*chart, error) {
	d, err := s.ins.DueCounts(ctx, topic, now, time.Minute, chartMinutes)
	if err != nil {
		return nil, err
	}
	return layoutChart(now, d.Overdue, d.Counts), nil
}

// layoutChart places one bar per count, scaled to the largest.
func layoutChart(from time.Time, overdue int64, counts []int64) *chart {
	c := &chart{
		Width: chartWidth, Height: chartHeight, Overdue: overdue, From: from.UTC(),
		PlotBottom: chartHeight - chartBottom, PlotLeft: chartLeft, PlotRight: chartWidth - 4,
	}
	for _, v := range counts {
		c.Max = max(c.Max, v)
		c.Total += v
	}
	plotH := c.PlotBottom - chartTop
	step := (c.PlotRight - c.PlotLeft) / max(len(counts), 1)
	top := max(c.Max, 1)
	for i, v := range counts {
		h := int(int64(plotH) * v / top)
		if v > 0 && h < 2 {
			h = 2 // a minute with anything in it shows
		}
		start := c.From.Add(time.Duration(i) * time.Minute)
		c.Bars = append(c.Bars, bar{
			X: c.PlotLeft + i*step + 1, Y: c.PlotBottom - h, W: max(step-2, 1), H: h, Count: v,
			Title: fmt.Sprintf("%s–%s UTC: %s due", start.Format("15:04:05"), start.Add(time.Minute).Format("15:04:05"), formatNum(v)),
		})
	}
	for m := 0; m <= len(counts); m += 15 {
		anchor := "middle"
		switch m {
		case 0:
			anchor = "start"
		case len(counts):
			anchor = "end"
		}
		c.Ticks = append(c.Ticks, tick{
			X: c.PlotLeft + m*step, Y: chartHeight - 6, Anchor: anchor,
			Label: fmt.Sprintf("+%dm %s", m, c.From.Add(time.Duration(m)*time.Minute).Format("15:04")),
		})
	}
	for _, f := range []int64{0, 1, 2} { // 0, half and the top
		v := top * f / 2
		if c.Max == 0 && f > 0 {
			break
		}
		c.YTicks = append(c.YTicks, tick{X: c.PlotLeft - 6, Y: c.PlotBottom - int(int64(plotH)*v/top) + 4, Label: formatNum(v), Anchor: "end"})
	}
	return c
}
