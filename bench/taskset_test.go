package bench

import (
	"os/exec"
	"strconv"
)

func execTaskset(pid, cpu int) ([]byte, error) {
	return exec.Command("taskset", "-a", "-p", "-c", strconv.Itoa(cpu), strconv.Itoa(pid)).CombinedOutput()
}
