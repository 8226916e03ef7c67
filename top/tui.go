package top

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Help is the key line at the bottom of the interactive view, its
// segments dropped from the end on a narrow terminal.
var Help = []string{"q quit", "c r e n sort by cpu, requests, errors, name", "s next sort", "/ filter", "esc clear", "space refresh"}

// Interactive runs the full-screen view on in/out until q or ctx ends,
// sampling s every interval,
// sorting the rows by sort (ByCPU when empty).
func Interactive(ctx context.Context, s *Sampler, interval time.Duration, sort string, in io.Reader, out io.Writer) error {
	if sort == "" {
		sort = ByCPU
	}
	m := &model{s: s, interval: interval, view: View{Sort: sort}}
	p := tea.NewProgram(m, tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen(), tea.WithContext(ctx))
	_, err := p.Run()
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

type tickMsg time.Time

type model struct {
	s        *Sampler
	interval time.Duration
	view     View
	snap     Snapshot
	err      error
	editing  bool   // typing a filter
	input    string // the filter being typed
	width    int
	height   int
}

func (m *model) Init() tea.Cmd {
	m.sample()
	return m.tick()
}

func (m *model) tick() tea.Cmd {
	return tea.Tick(m.interval, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func (m *model) sample() {
	snap, err := m.s.Sample(time.Now())
	m.err = err
	if err == nil {
		m.snap = snap
	}
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tickMsg:
		m.sample()
		return m, m.tick()
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyMsg:
		if m.editing {
			switch msg.Type {
			case tea.KeyEnter:
				m.view.Filter, m.editing = m.input, false
			case tea.KeyEsc:
				m.editing = false
			case tea.KeyBackspace:
				if m.input != "" {
					m.input = m.input[:len(m.input)-1]
				}
			case tea.KeyRunes:
				m.input += string(msg.Runes)
			case tea.KeyCtrlC:
				return m, tea.Quit
			}
			return m, nil
		}
		switch msg.String() {
		case "q", "ctrl+c":
			return m, tea.Quit
		case "s":
			i := slices.Index(SortOrders, m.view.Sort)
			m.view.Sort = SortOrders[(i+1)%len(SortOrders)]
		case "c":
			m.view.Sort = ByCPU
		case "r":
			m.view.Sort = ByRequests
		case "e":
			m.view.Sort = ByErrors
		case "n":
			m.view.Sort = ByName
		case "/":
			m.editing, m.input = true, m.view.Filter
		case "esc":
			m.view.Filter = ""
		case " ":
			m.sample()
		}
	}
	return m, nil
}

// View fits the terminal: the snapshot in all but the last two lines,
// then the order and filter, then the keys (those that fit).
func (m *model) View() string {
	var b strings.Builder
	v := m.view
	v.Width = m.width
	if m.height > 0 {
		v.Height = max(1, m.height-3) // the status and key lines, and the empty line before them
	}
	if m.err != nil {
		b.WriteString(strings.Join(wrap([]string{"error: " + Printable(m.err.Error())}, v.Width), "\n") + "\n")
		v.Height = max(1, v.Height-1)
	}
	Write(&b, m.snap, v)
	status := "sort: " + m.view.Sort
	if m.view.Filter != "" {
		status += "  filter: " + Printable(m.view.Filter)
	}
	b.WriteString("\n" + wrap([]string{status}, m.width)[0] + "\n")
	if m.editing {
		b.WriteString(wrap([]string{"filter: " + Printable(m.input) + "_"}, m.width)[0])
	} else {
		keys := Help
		for m.width > 0 && len(keys) > 1 && len(strings.Join(keys, "  ")) > m.width {
			keys = keys[:len(keys)-1]
		}
		b.WriteString(strings.Join(keys, "  "))
	}
	// No newline after the last line: it would be one line more than the
	// terminal has, and the title would scroll away.
	return b.String()
}
