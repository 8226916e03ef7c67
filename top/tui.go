package top

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Help is the key line at the bottom of the interactive view.
const Help = "q quit  s sort (name, requests, cpu, errors)  / filter  esc clear filter  space refresh now"

// Interactive runs the full-screen view on in/out until q or ctx ends,
// sampling s every interval.
func Interactive(ctx context.Context, s *Sampler, interval time.Duration, in io.Reader, out io.Writer) error {
	m := &model{s: s, interval: interval, view: View{Sort: ByName}}
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
		m.width = msg.Width
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

func (m *model) View() string {
	var b strings.Builder
	if m.err != nil {
		b.WriteString("error: " + Printable(m.err.Error()) + "\n")
	}
	Write(&b, m.snap, m.view)
	b.WriteString("\nsort: " + m.view.Sort)
	if m.view.Filter != "" {
		b.WriteString("  filter: " + Printable(m.view.Filter))
	}
	b.WriteString("\n")
	if m.editing {
		b.WriteString("filter: " + Printable(m.input) + "_\n")
	} else {
		b.WriteString(Help + "\n")
	}
	return b.String()
}
